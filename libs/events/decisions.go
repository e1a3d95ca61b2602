package events

import (
	"strconv"
	"strings"
)

// DecisionID is the id of the i-th decision admission made after reading
// the log up to sequence at. prefix is "admission", or a shard's name
// (bus.ShardName), so that one shard's decision is never deduplicated as
// another's. The id is derived from the position so that a new leader
// deciding the same thing at the same position is deduplicated by
// JetStream, and it tells a reader of the log where each run of the
// deciding core happened (DecidedAt).
func DecisionID(prefix string, at uint64, i int) string {
	return prefix + "/" + strconv.FormatUint(at, 10) + "/" + strconv.Itoa(i)
}

// DecidedAt is the log position a decision of admission was made at
// (every event up to it read, none after): what DecisionID put in its id.
// False for any other event.
func DecidedAt(ev Event) (uint64, bool) {
	at, _, ok := DecisionOf(ev)
	return at, ok
}

// DecisionOf is the log position and the index in its run of a decision
// of admission (DecisionID). False for any other event.
func DecisionOf(ev Event) (at uint64, i int, ok bool) {
	parts := strings.Split(ev.ID, "/")
	if ev.Source != SourceAdmission || len(parts) != 3 || !decider(parts[0]) {
		return 0, 0, false
	}
	at, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil || at == 0 {
		return 0, 0, false
	}
	n, err := strconv.ParseUint(parts[2], 10, 31)
	if err != nil {
		return 0, 0, false
	}
	return at, int(n), true
}

// decider says whether prefix is admission's or one of its shards'.
func decider(prefix string) bool {
	n, ok := strings.CutPrefix(prefix, "admission")
	if !ok {
		return false
	}
	if n == "" {
		return true
	}
	_, err := strconv.ParseUint(strings.TrimPrefix(n, "-"), 10, 31)
	return n[0] == '-' && err == nil
}
