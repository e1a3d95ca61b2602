// Package clocksince is a probe: it breaks the purity rule on purpose.
package clocksince

import "time"

var _ = time.Since
