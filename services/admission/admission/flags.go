package admission

import (
	"flag"
	"time"

	"github.com/jetqueue/jetqueue/libs/service"
)

// RegisterFlags declares the service's flags; each also reads JQ_<NAME>.
func RegisterFlags(fs *flag.FlagSet, c *Config) {
	service.RegisterMemberFlags(fs, &c.Member, "admission-0")
	fs.BoolVar(&c.ManualClock, "manual-clock", false, "dev/test only: read the shared manual clock")
	fs.DurationVar(&c.MaxSkew, "max-skew", time.Second, "how far ahead of this clock the latest event read may stamp a decision; an event's time never moves the clock further")
}
