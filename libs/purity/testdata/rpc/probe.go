// Package rpc is a probe: it breaks the purity rule on purpose.
package rpc

import _ "net/rpc"
