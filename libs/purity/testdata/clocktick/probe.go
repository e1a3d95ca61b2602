// Package clocktick is a probe: it breaks the purity rule on purpose.
package clocktick

import "time"

var _ = time.Tick
