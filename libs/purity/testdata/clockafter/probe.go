// Package clockafter is a probe: it breaks the purity rule on purpose.
package clockafter

import "time"

var _ = time.After
