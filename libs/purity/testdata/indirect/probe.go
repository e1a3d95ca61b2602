// Package indirect is a probe: it breaks the purity rule on purpose.
package indirect

import _ "github.com/jetqueue/jetqueue/libs/purity/testdata/os"
