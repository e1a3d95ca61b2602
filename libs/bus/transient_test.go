package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/testenv"
)

// closedPort is a local TCP address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestTransient classifies errors as the clients really return them
// where that is cheap (a real NATS server, a closed port), and as nats.go
// and pgx build them otherwise.
func TestTransient(t *testing.T) {
	srv := testenv.NATS(t)
	nc, err := Connect(srv.ClientURL(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := EnsureStream(ctx, js, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	// A subscriber that never answers.
	sub, err := nc.SubscribeSync("silent")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	closed, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()

	real := func(f func() error) error {
		err := f()
		if err == nil {
			t.Fatal("the operation that should fail succeeded")
		}
		return err
	}
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 50*time.Millisecond)
	}
	apiError := func(code jetstream.ErrorCode, status int) error {
		// As jetstream's publish wraps the ack's error.
		return fmt.Errorf("nats: %w", &jetstream.APIError{Code: status, ErrorCode: code, Description: "test"})
	}
	port := closedPort(t)

	tests := map[string]struct {
		err  error
		want bool
	}{
		"nil": {nil, false},
		"a request's deadline": {real(func() error {
			c, cancel := short()
			defer cancel()
			_, err := nc.RequestWithContext(c, "silent", nil)
			return err
		}), true},
		"nats request timeout": {real(func() error { _, err := nc.Request("silent", nil, 50*time.Millisecond); return err }), true},
		"no responders":        {real(func() error { _, err := nc.Request("nobody.here", nil, time.Second); return err }), true},
		"no stream answers a publish": {real(func() error {
			_, err := js.Publish(ctx, "no.stream.here", nil, jetstream.WithRetryAttempts(0))
			return err
		}), true},
		"request on a closed connection": {real(func() error { _, err := closed.Request("x", nil, time.Second); return err }), true},
		"reconnecting":                   {fmt.Errorf("publish: %w", nats.ErrConnectionReconnecting), true},
		"draining":                       {fmt.Errorf("publish: %w", nats.ErrConnectionDraining), true},
		"disconnected":                   {nats.ErrDisconnected, true},
		"no heartbeat":                   {jetstream.ErrNoHeartbeat, true},
		"JetStream temporarily unavailable (10008)": {apiError(10008, 503), true},
		"cluster cannot handle request (10009)":     {apiError(10009, 500), true},
		"insufficient resources (10023)":            {apiError(10023, 503), true},
		"stream offline (10118)":                    {apiError(10118, 500), true},
		"stream offline with reason (10194)":        {apiError(10194, 500), true},
		"JetStream not enabled yet (10076)":         {jetstream.ErrJetStreamNotEnabled, true},
		"expected last subject sequence not ready":  {apiError(10163, 503), true},
		"nats dial refused": {real(func() error {
			_, err := Connect("nats://"+port, "refused", nats.NoReconnect())
			return err
		}), true},
		"postgres refused": {real(func() error {
			c, err := pgconn.Connect(ctx, "postgres://postgres@"+port+"/postgres?sslmode=disable&connect_timeout=2")
			if err == nil {
				c.Close(ctx)
			}
			return err
		}), true},
		"postgres admin shutdown":        {fmt.Errorf("query: %w", &pgconn.PgError{Code: "57P01"}), true},
		"postgres connection failure":    {&pgconn.PgError{Code: "08006"}, true},
		"postgres serialization failure": {&pgconn.PgError{Code: "40001"}, true},
		"network timeout": {real(func() error {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil
			}
			defer l.Close()
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				return nil
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			_, err = c.Read(make([]byte, 1))
			return err
		}), true},

		"the caller left": {real(func() error {
			c, cancel := context.WithCancel(ctx)
			cancel()
			_, err := nc.RequestWithContext(c, "silent", nil)
			return err
		}), false},
		"the caller left a database request": {real(func() error {
			c, cancel := context.WithCancel(ctx)
			cancel()
			conn, err := pgconn.Connect(c, "postgres://postgres@"+port+"/postgres?sslmode=disable")
			if err == nil {
				conn.Close(ctx)
			}
			return err
		}), false},
		"stream not found": {real(func() error { _, err := js.Stream(ctx, "NOPE"); return err }), false},
		"message not found": {real(func() error {
			s, err := js.Stream(ctx, "JQ_EVENTS")
			if err != nil {
				return err
			}
			_, err = s.GetMsg(ctx, 1_000_000)
			return err
		}), false},
		"fence failed": {real(func() error {
			_, _, err := Publish(ctx, js, podsReady("t1", "team-a", "w"), ptr(7))
			return err
		}), false},
		"JetStream not enabled for the account (10039, 503)": {apiError(10039, 503), false},
		"message too large (10077, 503)":                     {apiError(10077, 503), false},
		"wrong last sequence (10071)":                        {apiError(10071, 400), false},
		"duplicate message id in process (10158, 409)":       {apiError(10158, 409), true},
		"postgres unique violation":                          {&pgconn.PgError{Code: "23505"}, false},
		"a bug":                                              {errors.New("index out of range"), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Logf("%T: %v", tc.err, tc.err)
			if got := Transient(tc.err); got != tc.want {
				t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
