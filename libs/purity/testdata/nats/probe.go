// Package nats is a probe: it breaks the purity rule on purpose.
package nats

import _ "github.com/nats-io/nats.go"
