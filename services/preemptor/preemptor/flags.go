package preemptor

import (
	"flag"

	"github.com/jetqueue/jetqueue/libs/service"
)

// RegisterFlags declares the service's flags; each also reads JQ_<NAME>.
func RegisterFlags(fs *flag.FlagSet, c *Config) {
	service.RegisterMemberFlags(fs, &c.Member, "preemptor-0")
}
