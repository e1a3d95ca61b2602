// Package clocksleep is a probe: it breaks the purity rule on purpose.
package clocksleep

import "time"

var _ = time.Sleep
