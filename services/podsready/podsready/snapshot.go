package podsready

// Snapshots (libs/snapshot). The replica is a fold of the log at every
// moment: podsready only applies events it reads, and what it publishes
// changes nothing until it is read back. So the instance encodes its own
// state whenever the policy says so, leader or standby, and on start
// restores the newest usable snapshot and reads from Jq-Seq+1.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// snapshotVersion is the version of the podsready snapshot: the engine's
// encoding version and this envelope's.
const snapshotVersion = engine.SnapshotVersion*100 + 2

// snapState is the podsready snapshot's envelope. The payload is the
// envelope's JSON, a newline, then the engine's snapshot (binary; JSON
// holds no raw newline).
type snapState struct {
	OnSubj         map[string]uint64 `json:"onSubj"`
	SkippedThrough uint64            `json:"skippedThrough,omitempty"`
	// Partial: the replica had passed over events unread (dormant, with
	// waitForPodsReady off). Such a snapshot serves a replica that stays
	// dormant, and keeps retention's gate moving; a replica reading every
	// event refuses it and replays the whole log.
	Partial bool `json:"partial,omitempty"`
}

func (s *Service) encodeState() ([]byte, error) {
	eng, err := s.eng.EncodeSnapshot()
	if err != nil {
		return nil, err
	}
	head, err := json.Marshal(snapState{OnSubj: s.onSubj, SkippedThrough: s.skippedThrough, Partial: s.dormant > 0})
	if err != nil {
		return nil, err
	}
	return slices.Concat(head, []byte{'\n'}, eng), nil
}

// restoreState replaces the replica with a snapshot's, or leaves it as it
// is and returns why not.
func (s *Service) restoreState(sn *snapshot.Snapshot) error {
	head, eng, ok := bytes.Cut(sn.Payload, []byte{'\n'})
	if !ok {
		return fmt.Errorf("podsready snapshot: no engine state")
	}
	var st snapState
	if err := json.Unmarshal(head, &st); err != nil {
		return fmt.Errorf("podsready snapshot: %w", err)
	}
	if st.Partial && s.full {
		return fmt.Errorf("podsready snapshot: written while events were passed over unread, and this replica reads every event")
	}
	e, err := engine.DecodeSnapshot(eng)
	if err != nil {
		return err
	}
	for subj, seq := range st.OnSubj {
		if seq == 0 || seq > sn.Seq {
			return fmt.Errorf("podsready snapshot: subject %s at %d, beyond the snapshot's %d", subj, seq, sn.Seq)
		}
	}
	if st.OnSubj == nil {
		st.OnSubj = map[string]uint64{}
	}
	s.eng, s.onSubj, s.last = e, st.OnSubj, sn.Seq
	if st.Partial {
		// What it passed over is missing here too: turning
		// waitForPodsReady on must rebuild from the whole log.
		s.dormant = max(s.dormant, 1)
	}
	s.skippedThrough = max(s.skippedThrough, st.SkippedThrough)
	return nil
}

// maybeSnapshot writes a snapshot in the background when one is due.
func (s *Service) maybeSnapshot(ctx context.Context) {
	w := s.snaps
	if !w.Due(s.last) {
		return
	}
	payload, err := s.encodeState()
	if err != nil {
		w.Done(0, err)
		return
	}
	last := s.last
	w.Start(func() (uint64, error) { return last, w.Store.Save(ctx, last, payload) })
}
