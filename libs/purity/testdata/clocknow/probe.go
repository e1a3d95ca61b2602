// Package clocknow is a probe: it breaks the purity rule on purpose.
package clocknow

import "time"

var _ = time.Now
