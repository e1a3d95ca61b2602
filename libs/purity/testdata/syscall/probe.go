// Package syscall is a probe: it breaks the purity rule on purpose.
package syscall

import _ "syscall"
