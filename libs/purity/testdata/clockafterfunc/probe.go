// Package clockafterfunc is a probe: it breaks the purity rule on purpose.
package clockafterfunc

import "time"

var _ = time.AfterFunc
