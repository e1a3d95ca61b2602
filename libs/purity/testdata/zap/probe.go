// Package zap is a probe: it breaks the purity rule on purpose.
package zap

import _ "go.uber.org/zap"
