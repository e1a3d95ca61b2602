// Package http is a probe: it breaks the purity rule on purpose.
package http

import _ "net/http"
