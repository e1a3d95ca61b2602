// Package clocknewticker is a probe: it breaks the purity rule on purpose.
package clocknewticker

import "time"

var _ = time.NewTicker
