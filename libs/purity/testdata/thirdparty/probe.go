// Package thirdparty is a probe: it breaks the purity rule on purpose,
// through a third-party package that is no Kubernetes type library.
package thirdparty

import _ "github.com/coreos/go-oidc/v3/oidc"
