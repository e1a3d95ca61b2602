package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// The projection's position is last_seq in projection_state, written in
// the same transaction as the rows it produced. Apply keeps one rule: the
// projection moves through the stream one sequence at a time, and every
// sequence is accounted for, as an event projected, an event parked (see
// Parked), or a span the stream no longer holds (Record.Gone). A batch
// that would leave a sequence unaccounted for is refused, never skipped.

// ErrOutOfSequence means a batch does not continue the projection at
// last_seq+1: the caller must read again from there.
var ErrOutOfSequence = errors.New("batch does not continue the projection")

// SequenceError is the refusal of a batch out of sequence: the projection
// is at Last, and the batch went on at Next instead of Last+1.
type SequenceError struct {
	Last, Next uint64
}

func (e *SequenceError) Error() string {
	return fmt.Sprintf("projection at %d, batch continues at %d: %v", e.Last, e.Next, ErrOutOfSequence)
}

func (e *SequenceError) Unwrap() error { return ErrOutOfSequence }

// ErrUnstorable marks an event the projection can never store, however
// often it is retried: a payload it cannot fold. Unstorable also
// recognises the database's own refusals.
var ErrUnstorable = errors.New("event cannot be stored")

// Unstorable reports whether err means the content of a batch, not the
// database's availability, is at fault, so that retrying the same batch
// cannot help: ErrUnstorable, or a PostgreSQL error of class 22 (data
// exception: a NUL in jsonb, an untranslatable character, a number out of
// range), 23 (integrity constraint) or 54 (program limit: a key too long
// for its index). Anything else (connection lost, server shutting down,
// serialization failure) is worth retrying.
func Unstorable(err error) bool {
	if errors.Is(err, ErrUnstorable) {
		return true
	}
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || len(pg.Code) < 2 {
		return false
	}
	switch pg.Code[:2] {
	case "22", "23", "54":
		return true
	}
	return false
}

// Parked is an event the projection stores aside instead of projecting:
// Apply writes it to parked_events and moves past it.
type Parked struct {
	Type, Subject string
	// Data is the message body as it is in the stream.
	Data []byte
	// Reason says why it could not be projected.
	Reason string
}

// end is the last sequence a record accounts for.
func (r Record) end() uint64 {
	if r.Gone > 0 {
		return r.Seq + r.Gone - 1
	}
	return r.Seq
}

// pending returns the records of recs after last: a prefix the projection
// already holds is dropped (a batch retried after a commit whose answer
// was lost, or written by a writer that has since lost its lease), and
// what remains must continue at last+1 without a hole.
func pending(last uint64, recs []Record) ([]Record, error) {
	next := last + 1
	var todo []Record
	for _, r := range recs {
		end := r.end()
		if end < next && len(todo) == 0 {
			continue
		}
		if r.Seq > next || end < next {
			return nil, &SequenceError{Last: next - 1, Next: r.Seq}
		}
		if r.Seq < next {
			// Only a span of gone sequences can straddle the position.
			r.Gone, r.Seq = end-next+1, next
		}
		todo = append(todo, r)
		next = end + 1
	}
	return todo, nil
}

// maxParkedText bounds the text columns of a parked event: the reason and
// type come from outside.
const maxParkedText = 2048

// clean makes text from outside storable in a text column: valid UTF-8,
// no NUL (which PostgreSQL text refuses), bounded.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) > maxParkedText {
		s = s[:maxParkedText]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}
