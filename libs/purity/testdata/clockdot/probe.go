// Package clockdot is a probe: it breaks the purity rule on purpose.
package clockdot

import . "time"

var _ = Now
