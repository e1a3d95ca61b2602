// Package exec is a probe: it breaks the purity rule on purpose.
package exec

import _ "os/exec"
