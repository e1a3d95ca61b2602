// Package clockalias is a probe: it breaks the purity rule on purpose.
package clockalias

import clock "time"

var _ = clock.Now
