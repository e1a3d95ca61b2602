package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func setup(t *testing.T) (context.Context, jetstream.JetStream) {
	t.Helper()
	srv := testenv.NATS(t)
	nc, err := bus.Connect(srv.ClientURL(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if _, err := bus.EnsureStream(ctx, js, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	return ctx, js
}

// publish puts n events in JQ_EVENTS.
func publish(t *testing.T, ctx context.Context, js jetstream.JetStream, n int) {
	t.Helper()
	for i := range n {
		ev := events.Event{ID: fmt.Sprintf("ev-%d-%d", time.Now().UnixNano(), i), Type: events.PodsReady, Source: "test", Time: t0,
			Subject: events.WorkloadSubject("ns", "w"), Data: &events.WorkloadRef{Namespace: "ns", Name: "w"}}
		if _, _, err := bus.Publish(ctx, js, ev, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func open(t *testing.T, ctx context.Context, js jetstream.JetStream, version int, max int64) (*Store, *Metrics) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry(), "test")
	s, err := Open(ctx, js, Options{Name: "admission-0", Version: version, MaxSize: max, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

func TestSaveLoadRoundTrip(t *testing.T) {
	ctx, js := setup(t)
	publish(t, ctx, js, 5)
	s, m := open(t, ctx, js, 3, 0)
	payload := bytes.Repeat([]byte("state "), 100_000)
	if err := s.Save(ctx, 4, payload); err != nil {
		t.Fatal(err)
	}
	var got *Snapshot
	seq := s.Restore(ctx, func(sn *Snapshot) error { got = sn; return nil })
	if seq != 4 || got == nil || got.Seq != 4 || got.Version != 3 || !bytes.Equal(got.Payload, payload) {
		t.Fatalf("restored seq %d, snapshot %+v", seq, got != nil)
	}
	// The metadata other services read (retention) is exactly this.
	obs, err := js.ObjectStore(ctx, Bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := obs.GetInfo(ctx, "admission-0")
	if err != nil {
		t.Fatal(err)
	}
	if info.Metadata["Jq-Seq"] != "4" || info.Metadata["Jq-Version"] != "3" {
		t.Fatalf("metadata %v", info.Metadata)
	}
	if n := testutil.ToFloat64(m.Restores); n != 1 {
		t.Fatalf("restores = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.Writes); n != 1 {
		t.Fatalf("writes = %v, want 1", n)
	}
	// A restored snapshot is as old as its write: the object's time.
	if !got.At.Equal(info.ModTime) || got.At.IsZero() {
		t.Errorf("restored snapshot written at %v, the object's time is %v", got.At, info.ModTime)
	}
	m.Age.Now = func() time.Time { return info.ModTime.Add(time.Minute) }
	if age := testutil.ToFloat64(m.Age); age != 60 {
		t.Errorf("jetqueue_snapshot_age_seconds = %v a minute after the write, want 60", age)
	}
	// A snapshot never goes back: an older one is not stored.
	if err := s.Save(ctx, 2, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if seq := s.Restore(ctx, func(sn *Snapshot) error { got = sn; return nil }); seq != 4 || !bytes.Equal(got.Payload, payload) {
		t.Fatalf("after saving an older snapshot, restored seq %d", seq)
	}
}

func TestNoSnapshotIsAFullReplayWithoutWarning(t *testing.T) {
	ctx, js := setup(t)
	s, m := open(t, ctx, js, 1, 0)
	if seq := s.Restore(ctx, func(*Snapshot) error { t.Fatal("decode called"); return nil }); seq != 0 {
		t.Fatalf("seq %d", seq)
	}
	if n := testutil.CollectAndCount(m.Fallbacks); n != 0 {
		t.Fatalf("%d fallback series, want none", n)
	}
}

// TestFallbacks: every kind of unusable snapshot gives a full replay (0),
// never decode on bad data, and one count under its reason.
func TestFallbacks(t *testing.T) {
	cases := []struct {
		reason string
		// prepare leaves a bad snapshot behind; read opens the reader.
		prepare func(t *testing.T, ctx context.Context, js jetstream.JetStream)
		version int
		max     int64
		decode  error
	}{
		{reason: ReasonVersion, version: 2, prepare: func(t *testing.T, ctx context.Context, js jetstream.JetStream) {
			s, _ := open(t, ctx, js, 1, 0)
			must(t, s.Save(ctx, 3, []byte("v1 state")))
		}},
		{reason: ReasonAhead, version: 1, prepare: func(t *testing.T, ctx context.Context, js jetstream.JetStream) {
			s, _ := open(t, ctx, js, 1, 0)
			must(t, s.Save(ctx, 99, []byte("from the future")))
		}},
		{reason: ReasonStream, version: 1, prepare: func(t *testing.T, ctx context.Context, js jetstream.JetStream) {
			s, _ := open(t, ctx, js, 1, 0)
			must(t, s.Save(ctx, 3, []byte("of the old stream")))
			// The stream is deleted and recreated, and grows past the
			// snapshot's sequence again.
			must(t, js.DeleteStream(ctx, events.Stream))
			time.Sleep(10 * time.Millisecond) // creation times differ
			_, err := bus.EnsureStream(ctx, js, bus.StreamOptions{})
			must(t, err)
			publish(t, ctx, js, 5)
		}},
		{reason: ReasonGap, version: 1, prepare: func(t *testing.T, ctx context.Context, js jetstream.JetStream) {
			s, _ := open(t, ctx, js, 1, 0)
			must(t, s.Save(ctx, 3, []byte("before the purge floor")))
			// Retention purged what ended at or below event 4.
			must(t, bus.RaisePurgeFloor(ctx, js, 4))
		}},
		{reason: ReasonTooLarge, version: 1, max: 1000, prepare: func(t *testing.T, ctx context.Context, js jetstream.JetStream) {
			s, _ := open(t, ctx, js, 1, 0)
			must(t, s.Save(ctx, 3, bytes.Repeat([]byte{'x'}, 5000)))
		}},
		{reason: ReasonCorrupt, version: 1, prepare: func(t *testing.T, ctx context.Context, js jetstream.JetStream) {
			// Right metadata and digest, but not gzip.
			obs, err := EnsureBucket(ctx, js)
			must(t, err)
			_, err = obs.Put(ctx, jetstream.ObjectMeta{Name: "admission-0", Metadata: meta(t, ctx, js, 3, 1)}, bytes.NewReader([]byte("not gzip")))
			must(t, err)
		}},
		{reason: ReasonCorrupt, version: 1, prepare: func(t *testing.T, ctx context.Context, js jetstream.JetStream) {
			s, _ := open(t, ctx, js, 1, 0)
			must(t, s.Save(ctx, 3, bytes.Repeat([]byte("state"), 1000)))
			corruptChunk(t, ctx, js)
		}},
		{reason: ReasonUnreadable, version: 1, prepare: func(t *testing.T, ctx context.Context, js jetstream.JetStream) {
			obs, err := EnsureBucket(ctx, js)
			must(t, err)
			md := meta(t, ctx, js, 3, 1)
			md[MetaSeq] = "three"
			_, err = obs.Put(ctx, jetstream.ObjectMeta{Name: "admission-0", Metadata: md}, bytes.NewReader(nil))
			must(t, err)
		}},
		{reason: ReasonDecode, version: 1, decode: errors.New("the decider refuses it"), prepare: func(t *testing.T, ctx context.Context, js jetstream.JetStream) {
			s, _ := open(t, ctx, js, 1, 0)
			must(t, s.Save(ctx, 3, []byte("{")))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			ctx, js := setup(t)
			publish(t, ctx, js, 5)
			tc.prepare(t, ctx, js)
			s, m := open(t, ctx, js, tc.version, tc.max)
			decoded := 0
			seq := s.Restore(ctx, func(*Snapshot) error { decoded++; return tc.decode })
			if seq != 0 {
				t.Fatalf("restored seq %d, want a full replay", seq)
			}
			if tc.decode == nil && decoded != 0 {
				t.Fatalf("decode ran on an unusable snapshot")
			}
			if n := testutil.ToFloat64(m.Fallbacks.WithLabelValues(tc.reason)); n != 1 {
				t.Fatalf("fallbacks{reason=%s} = %v, want 1", tc.reason, n)
			}
			if n := testutil.CollectAndCount(m.Fallbacks); n != 1 {
				t.Fatalf("%d fallback series, want 1", n)
			}
		})
	}
}

func meta(t *testing.T, ctx context.Context, js jetstream.JetStream, seq uint64, version int) map[string]string {
	stream, err := js.Stream(ctx, events.Stream)
	must(t, err)
	return map[string]string{MetaSeq: strconv.FormatUint(seq, 10), MetaVersion: strconv.Itoa(version), MetaStream: streamID(stream.CachedInfo())}
}

// corruptChunk replaces the stored object's data with other bytes, under
// its digest.
func corruptChunk(t *testing.T, ctx context.Context, js jetstream.JetStream) {
	obs, err := js.ObjectStore(ctx, Bucket)
	must(t, err)
	info, err := obs.GetInfo(ctx, "admission-0")
	must(t, err)
	stream, err := js.Stream(ctx, "OBJ_"+Bucket)
	must(t, err)
	subject := "$O." + Bucket + ".C." + info.NUID
	msg, err := stream.GetLastMsgForSubject(ctx, subject)
	must(t, err)
	data := bytes.Clone(msg.Data)
	data[len(data)/2] ^= 0xff
	must(t, stream.Purge(ctx, jetstream.WithPurgeSubject(subject)))
	_, err = js.Publish(ctx, subject, data)
	must(t, err)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPolicyDue(t *testing.T) {
	p := Policy{Events: 100, Interval: time.Minute}
	cases := []struct {
		seq, last uint64
		elapsed   time.Duration
		want      bool
	}{
		{seq: 50, last: 0, elapsed: time.Second, want: false},
		{seq: 100, last: 0, elapsed: time.Second, want: true},
		{seq: 51, last: 50, elapsed: time.Minute, want: true},
		{seq: 50, last: 50, elapsed: time.Hour, want: false},
		{seq: 40, last: 50, elapsed: time.Hour, want: false},
	}
	for _, c := range cases {
		if got := p.Due(c.seq, c.last, c.elapsed); got != c.want {
			t.Errorf("Due(%d, %d, %v) = %v, want %v", c.seq, c.last, c.elapsed, got, c.want)
		}
	}
	if (Policy{}).Due(1e9, 0, time.Hour*1e3) {
		t.Errorf("a zero policy snapshotted")
	}
}
