// Package os is a probe: it breaks the purity rule on purpose.
package os

import _ "os"
