// Package clocknewtimer is a probe: it breaks the purity rule on purpose.
package clocknewtimer

import "time"

var _ = time.NewTimer
