// Package net is a probe: it breaks the purity rule on purpose.
package net

import _ "net"
