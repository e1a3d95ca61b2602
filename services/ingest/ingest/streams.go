package ingest

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/jetqueue/jetqueue/libs/auth"
)

// A stream (a watch, ?watch=true, or the console's /v1/watch/workloads)
// holds a JetStream consumer and a connection for minutes. Each kind has
// a bound on this server (503 beyond: the server is full) and, inside
// it, a share per caller identity (--max-watches-per-caller; 429 with
// Retry-After beyond: the caller is), so that one user opening streams
// in a loop fills only their own share and every other caller still gets
// theirs. Under --anonymous every caller without a credential is one
// identity, system:anonymous, and shares one share.

// streamKind is one kind of stream, with its wording.
type streamKind struct {
	name   string // the key's prefix and the refused field
	plural string
}

var (
	objectWatch   = streamKind{name: "watch", plural: "watches"}
	consoleStream = streamKind{name: "stream", plural: "streams"}
)

// callerIdentity is whom a share belongs to: the user's UID, which a
// renamed user keeps, else the name.
func callerIdentity(u auth.User) string {
	if u.UID != "" {
		return "uid:" + u.UID
	}
	return "name:" + u.Name
}

// streamSlot takes a place for one more stream of kind, of at most
// total on this server; it answers 429 (with Retry-After) when the
// caller's share is full and 503 when the server's is (writeError sets
// Retry-After on both). The returned func gives the place back.
func (s *Server) streamSlot(r *http.Request, kind streamKind, total int) (func(), error) {
	u, err := s.caller(r)
	if err != nil {
		return nil, err
	}
	perCaller := s.cfg.HTTP.withDefaults().MaxWatchesPerCaller
	prefix := kind.name + "\x00"
	key := prefix + callerIdentity(u)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watches == nil {
		s.watches = map[string]int{}
	}
	if s.watches[key] >= perCaller {
		return nil, fail(http.StatusTooManyRequests, "", kind.name,
			fmt.Sprintf("too many %s: this caller holds %d, the most one caller may (--max-watches-per-caller); close one or try again later", kind.plural, perCaller))
	}
	open := 0
	for k, n := range s.watches {
		if strings.HasPrefix(k, prefix) {
			open += n
		}
	}
	if open >= total {
		return nil, fail(http.StatusServiceUnavailable, "", kind.name,
			fmt.Sprintf("%d %s are open on this server, the most it holds; try again later", total, kind.plural))
	}
	s.watches[key]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.watches[key]--; s.watches[key] <= 0 {
			delete(s.watches, key)
		}
	}, nil
}
