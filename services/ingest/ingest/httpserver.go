package ingest

import (
	"context"
	"net/http"
	"time"

	"github.com/nats-io/nuid"
)

// HTTPLimits bound what one HTTP client can hold of the server: a slow
// or silent client is cut off, and no header is read without limit.
type HTTPLimits struct {
	// ReadHeaderTimeout and ReadTimeout bound reading a request's headers
	// and the whole request.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// WriteTimeout bounds a handler and its answer. The routes that wait
	// on purpose (GET /v1/sync up to its timeout, the clock advance)
	// extend their own deadline beyond their longest wait.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may sit unused.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (and request line).
	MaxHeaderBytes int
	// MaxWatchesPerCaller bounds the watches, and apart the console
	// streams, one caller identity holds open at once (streams.go).
	MaxWatchesPerCaller int
}

// DefaultHTTPLimits are the flags' defaults.
var DefaultHTTPLimits = HTTPLimits{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      60 * time.Second,
	IdleTimeout:       2 * time.Minute,
	MaxHeaderBytes:    64 << 10,
	// A person's console tabs and a controller's few informers fit.
	MaxWatchesPerCaller: 8,
}

// withDefaults fills the limits left at zero (a Config built in code).
func (l HTTPLimits) withDefaults() HTTPLimits {
	d := DefaultHTTPLimits
	for _, f := range []struct{ v, def *time.Duration }{
		{&l.ReadHeaderTimeout, &d.ReadHeaderTimeout}, {&l.ReadTimeout, &d.ReadTimeout},
		{&l.WriteTimeout, &d.WriteTimeout}, {&l.IdleTimeout, &d.IdleTimeout},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxWatchesPerCaller <= 0 {
		l.MaxWatchesPerCaller = d.MaxWatchesPerCaller
	}
	return l
}

// httpServer is the API's server with the configured limits.
func (s *Server) httpServer(h http.Handler) *http.Server {
	l := s.cfg.HTTP.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// extendWrite gives a route that waits on purpose the time it may wait,
// plus a margin to answer, beyond the server's WriteTimeout. Answers
// recorded for NATS request/reply have no deadline to extend.
func extendWrite(w http.ResponseWriter, wait time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
}

// HeaderRequestID carries the id of every answer; a 5xx names it in its
// body too, and the log line with the internal error carries the same.
const HeaderRequestID = "X-Request-Id"

type requestIDKey struct{}

// withRequestID gives the request an id of ours (never the client's, which
// could be anything) and sets it on the answer.
func withRequestID(w http.ResponseWriter, r *http.Request) *http.Request {
	id := nuid.Next()
	w.Header().Set(HeaderRequestID, id)
	return r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
