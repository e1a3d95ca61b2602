// Package snapshot stores and restores the deciders' state in the
// JetStream Object Store bucket JQ_SNAPSHOTS, so that a decider starting
// up replays only the tail of JQ_EVENTS after its newest snapshot.
//
//	decider state ──encode (next to the engine)──▶ gzip ──▶ JQ_SNAPSHOTS/<service>-<shard>
//	                                                          metadata: Jq-Seq, Jq-Version, Jq-Stream
//	start: load ──▶ check (size, version, stream, sequence, digest, gzip) ──▶ decode ──▶ replay Jq-Seq+1…
//	                 └─ any failure: a warning, jetqueue_snapshot_fallbacks_total{reason}, full replay
//
// One object per decider, named after its lease key (admission-0, …).
// Jq-Seq is the last JQ_EVENTS sequence the state reflects; Jq-Version the
// version of the decider's encoding; Jq-Stream the creation time of the
// JQ_EVENTS stream the sequence counts in, so that a snapshot of a stream
// since deleted and recreated is never applied to the new one. Event
// retention reads Jq-Seq of every object to know how far events may go.
//
// The bucket's digest (SHA-256, checked by nats.go as an object is read)
// and gzip's CRC catch corruption. A snapshot is external input: its size
// is bounded before it is read, and the decoders validate what they read.
package snapshot

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/metrics"
)

// Bucket is the Object Store bucket of every decider's snapshot.
const Bucket = "JQ_SNAPSHOTS"

// Metadata keys of a snapshot object.
const (
	MetaSeq     = "Jq-Seq"
	MetaVersion = "Jq-Version"
	MetaStream  = "Jq-Stream"
)

// DefaultMaxSize bounds a snapshot, compressed and uncompressed.
const DefaultMaxSize = 1 << 30

// Fallback reasons, the label of jetqueue_snapshot_fallbacks_total.
const (
	ReasonUnreadable = "unreadable" // the bucket or object cannot be read, or its metadata is malformed
	ReasonCorrupt    = "corrupt"    // digest or gzip checksum mismatch, truncated
	ReasonVersion    = "version"    // another encoding version
	ReasonTooLarge   = "too_large"  // larger than the bound
	ReasonStream     = "stream"     // taken from another JQ_EVENTS (deleted and recreated since)
	ReasonAhead      = "ahead"      // reflects events beyond the stream's last
	ReasonGap        = "gap"        // events after it may be gone from the stream (it starts later, or retention purged past it)
	ReasonDecode     = "decode"     // the decider refused its content
)

// Phases of a restore, the label of jetqueue_snapshot_restore_seconds.
const (
	PhaseLoad   = "load"   // checking, downloading and decompressing the object
	PhaseDecode = "decode" // the decider rebuilding its state from the payload
)

// Snapshot is one decider's stored state.
type Snapshot struct {
	// Seq is the last JQ_EVENTS sequence the state reflects.
	Seq     uint64
	Version int
	Payload []byte
	// At is when it was written (the object's modification time; zero
	// when not read from the bucket).
	At time.Time
}

// Metrics are a decider's snapshot metrics, defined with every other
// metric in libs/metrics.
type Metrics = metrics.Snapshot

// NewMetrics registers a service's snapshot metrics on reg (nil: none).
func NewMetrics(reg prometheus.Registerer, service string) *Metrics {
	return metrics.NewSnapshot(reg, service)
}

// Store is one decider's snapshot object.
type Store struct {
	js      jetstream.JetStream
	obs     jetstream.ObjectStore
	name    string
	version int
	maxSize int64
	log     *zap.Logger
	metrics *Metrics
}

// Options configure a Store.
type Options struct {
	// Name is the object's name, the decider's lease key (admission-0).
	Name string
	// Version is the decider's encoding version.
	Version int
	// MaxSize bounds a snapshot (0: DefaultMaxSize).
	MaxSize int64
	Log     *zap.Logger
	Metrics *Metrics
}

// EnsureBucket creates JQ_SNAPSHOTS if needed, with JQ_EVENTS' replicas.
func EnsureBucket(ctx context.Context, js jetstream.JetStream) (jetstream.ObjectStore, error) {
	replicas, err := bus.Replicas(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("ensure %s: %w", Bucket, err)
	}
	obs, err := bus.Ensure(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		obs, err := js.ObjectStore(ctx, Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			// Nothing but the name and the replicas: creating it again
			// with the same settings (anyone may) is then a no-op.
			return js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: Bucket, Replicas: replicas})
		}
		return obs, err
	})
	if err != nil {
		return nil, fmt.Errorf("ensure %s: %w", Bucket, err)
	}
	return obs, nil
}

// Open returns the Store of one decider, creating the bucket if needed.
func Open(ctx context.Context, js jetstream.JetStream, o Options) (*Store, error) {
	obs, err := EnsureBucket(ctx, js)
	if err != nil {
		return nil, err
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil, o.Name)
	}
	return &Store{js: js, obs: obs, name: o.Name, version: o.Version, maxSize: o.MaxSize, log: o.Log, metrics: o.Metrics}, nil
}

// Metrics are the store's metrics.
func (s *Store) Metrics() *Metrics { return s.metrics }

// Name is the object's name.
func (s *Store) Name() string { return s.name }

// FallbackError is a snapshot found but not usable, with its reason.
type FallbackError struct {
	Reason string
	Err    error
}

func (e *FallbackError) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *FallbackError) Unwrap() error { return e.Err }

func fallback(reason string, format string, args ...any) error {
	return &FallbackError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// streamID identifies the JQ_EVENTS stream a sequence counts in.
func streamID(info *jetstream.StreamInfo) string {
	return info.Created.UTC().Format(time.RFC3339Nano)
}

// Load reads the newest snapshot, checked against the stream as it is
// now. No snapshot is (nil, nil); a snapshot that cannot be used is a
// *FallbackError.
func (s *Store) Load(ctx context.Context) (*Snapshot, error) {
	start := time.Now()
	info, err := s.obs.GetInfo(ctx, s.name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fallback(ReasonUnreadable, "object %s: %w", s.name, err)
	}
	md := info.Metadata
	version, err := strconv.Atoi(md[MetaVersion])
	if err != nil {
		return nil, fallback(ReasonUnreadable, "%s %q: %w", MetaVersion, md[MetaVersion], err)
	}
	if version != s.version {
		return nil, fallback(ReasonVersion, "version %d, this build reads %d", version, s.version)
	}
	seq, err := strconv.ParseUint(md[MetaSeq], 10, 64)
	if err != nil || seq == 0 {
		return nil, fallback(ReasonUnreadable, "%s %q: not a sequence", MetaSeq, md[MetaSeq])
	}
	if info.Size > uint64(s.maxSize) {
		return nil, fallback(ReasonTooLarge, "%d bytes, at most %d", info.Size, s.maxSize)
	}
	stream, err := s.js.Stream(ctx, events.Stream)
	if err != nil {
		return nil, fallback(ReasonUnreadable, "stream %s: %w", events.Stream, err)
	}
	si := stream.CachedInfo()
	if md[MetaStream] != streamID(si) {
		return nil, fallback(ReasonStream, "taken from stream created %s, %s was created %s", md[MetaStream], events.Stream, streamID(si))
	}
	if seq > si.State.LastSeq {
		return nil, fallback(ReasonAhead, "reflects event %d, the stream ends at %d", seq, si.State.LastSeq)
	}
	if si.State.Msgs > 0 && si.State.FirstSeq > seq+1 {
		return nil, fallback(ReasonGap, "reflects event %d, the stream starts at %d", seq, si.State.FirstSeq)
	}
	// Retention (libs/retention) may have purged histories that ended at
	// or below its purge floor: one that began in the snapshot and ended
	// after it would never end in the restored state.
	floor, err := bus.PurgeFloor(ctx, s.js)
	if err != nil {
		return nil, fallback(ReasonUnreadable, "%w", err)
	}
	if seq < floor {
		return nil, fallback(ReasonGap, "reflects event %d, the log may have been purged up to %d (list %s in ingest's --retention-snapshots)", seq, floor, s.name)
	}
	res, err := s.obs.Get(ctx, s.name)
	if err != nil {
		return nil, fallback(ReasonUnreadable, "object %s: %w", s.name, err)
	}
	defer res.Close()
	// Read into buffers of the right size at once: growing them as
	// io.ReadAll does copies and clears a large snapshot several times.
	// The digest is checked when the object is read to its end.
	compressed, err := readAll(io.LimitReader(res, s.maxSize+1), int(info.Size)+bytes.MinRead)
	switch {
	case errors.Is(err, jetstream.ErrDigestMismatch):
		return nil, fallback(ReasonCorrupt, "object %s: %w", s.name, err)
	case err != nil:
		return nil, fallback(ReasonUnreadable, "object %s: %w", s.name, err)
	case int64(len(compressed)) > s.maxSize:
		return nil, fallback(ReasonTooLarge, "more than %d bytes", s.maxSize)
	}
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return nil, fallback(ReasonCorrupt, "gzip: %w", err)
	}
	payload, err := readAll(io.LimitReader(zr, s.maxSize+1), gzipSize(compressed, s.maxSize))
	if err != nil {
		return nil, fallback(ReasonCorrupt, "gzip: %w", err)
	}
	if int64(len(payload)) > s.maxSize {
		return nil, fallback(ReasonTooLarge, "more than %d bytes uncompressed", s.maxSize)
	}
	s.metrics.RestoreSeconds.WithLabelValues(PhaseLoad).Set(time.Since(start).Seconds())
	s.metrics.Bytes.Set(float64(len(compressed)))
	return &Snapshot{Seq: seq, Version: version, Payload: payload, At: info.ModTime}, nil
}

// readAll reads r to its end into a buffer of capacity size (a hint).
func readAll(r io.Reader, size int) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, max(size, bytes.MinRead)))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// gzipSize is a hint of the uncompressed size of a gzip stream: its
// trailer's ISIZE (the size modulo 2^32), bounded by max and by deflate's
// largest ratio (1032:1) so that a hostile trailer costs no more, plus room for
// bytes.Buffer's last read. A wrong hint costs only a copy.
func gzipSize(gz []byte, max int64) int {
	if len(gz) < 4 {
		return 0
	}
	n := int64(binary.LittleEndian.Uint32(gz[len(gz)-4:]))
	return int(min(n, max, 1032*int64(len(gz)))) + bytes.MinRead
}

// Restore loads the newest snapshot and hands it to decode. It returns
// the sequence restored, or 0 when the caller must replay the whole log:
// no snapshot, or one that could not be used, which is logged as a
// warning and counted by reason. decode must leave the caller's state
// untouched when it fails.
func (s *Store) Restore(ctx context.Context, decode func(*Snapshot) error) uint64 {
	snap, err := s.Load(ctx)
	if err == nil && snap != nil {
		start := time.Now()
		if derr := decode(snap); derr != nil {
			err = &FallbackError{Reason: ReasonDecode, Err: derr}
		} else {
			s.metrics.RestoreSeconds.WithLabelValues(PhaseDecode).Set(time.Since(start).Seconds())
		}
	}
	if err != nil {
		reason := ReasonUnreadable
		var fe *FallbackError
		if errors.As(err, &fe) {
			reason = fe.Reason
		}
		s.metrics.Fallbacks.WithLabelValues(reason).Inc()
		s.log.Warn("snapshot not used; replaying the whole log", zap.String("object", Bucket+"/"+s.name),
			zap.String("reason", reason), zap.Error(err))
		return 0
	}
	if snap == nil {
		return 0
	}
	s.metrics.Restores.Inc()
	s.metrics.Seq.Set(float64(snap.Seq))
	if at := snap.At; !at.IsZero() {
		s.metrics.Taken(at)
	} else {
		s.metrics.Taken(time.Now())
	}
	s.log.Info("restored a snapshot", zap.String("object", Bucket+"/"+s.name), zap.Uint64("seq", snap.Seq))
	return snap.Seq
}

// Save stores payload as the state at seq, unless the stored snapshot is
// already at seq or later (a snapshot never goes back). The caller counts
// a failure (Metrics().Failures), which may come before Save.
func (s *Store) Save(ctx context.Context, seq uint64, payload []byte) error {
	return s.SavePaced(ctx, seq, payload, nil)
}

// compressPiece is how much of a payload a paced save compresses between
// two rests: about a millisecond of gzip at its best speed.
const compressPiece = 128 << 10

// SavePaced is Save calling rest, if not nil, between pieces of the
// compression, and giving up with its error (see Pacer).
func (s *Store) SavePaced(ctx context.Context, seq uint64, payload []byte, rest func() error) error {
	if info, err := s.obs.GetInfo(ctx, s.name); err == nil {
		if have, err := strconv.ParseUint(info.Metadata[MetaSeq], 10, 64); err == nil && have >= seq &&
			info.Metadata[MetaVersion] == strconv.Itoa(s.version) {
			return nil
		}
	} else if !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("snapshot %s: %w", s.name, err)
	}
	stream, err := s.js.Stream(ctx, events.Stream)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", s.name, err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	for rem := payload; len(rem) > 0; {
		n := len(rem)
		if rest != nil {
			n = min(n, compressPiece)
		}
		if _, err := zw.Write(rem[:n]); err != nil {
			return err
		}
		if rem = rem[n:]; rest != nil && len(rem) > 0 {
			if err := rest(); err != nil {
				return err
			}
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if int64(buf.Len()) > s.maxSize || int64(len(payload)) > s.maxSize {
		return fmt.Errorf("snapshot %s: %d bytes, at most %d", s.name, len(payload), s.maxSize)
	}
	n := buf.Len()
	_, err = s.obs.Put(ctx, jetstream.ObjectMeta{Name: s.name, Description: "state of " + s.name,
		Metadata: map[string]string{MetaSeq: strconv.FormatUint(seq, 10), MetaVersion: strconv.Itoa(s.version),
			MetaStream: streamID(stream.CachedInfo())}}, &buf)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", s.name, err)
	}
	s.metrics.Writes.Inc()
	s.metrics.Seq.Set(float64(seq))
	s.metrics.Taken(time.Now())
	s.metrics.Bytes.Set(float64(n))
	s.log.Info("wrote a snapshot", zap.String("object", Bucket+"/"+s.name), zap.Uint64("seq", seq), zap.Int("bytes", n))
	return nil
}

// Policy says when a decider snapshots: once Events events have been
// applied since the last snapshot, or once Interval has passed with at
// least one. Zero Events and zero Interval never snapshot.
type Policy struct {
	Events   uint64
	Interval time.Duration
}

// DefaultPolicy snapshots every 50,000 events or 10 minutes.
var DefaultPolicy = Policy{Events: 50_000, Interval: 10 * time.Minute}

// Due reports whether a snapshot at seq is due, the last being at last
// and taken elapsed ago.
func (p Policy) Due(seq, last uint64, elapsed time.Duration) bool {
	if seq <= last {
		return false
	}
	return (p.Events > 0 && seq-last >= p.Events) || (p.Interval > 0 && elapsed >= p.Interval)
}
