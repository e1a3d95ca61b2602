// Package clockuntil is a probe: it breaks the purity rule on purpose.
package clockuntil

import "time"

var _ = time.Until
