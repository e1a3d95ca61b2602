package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
)

// Read-your-writes across jqctl invocations. Every write the server
// accepts answers with the stream sequence it published at ("seq"); jqctl
// keeps the highest one per server in a file beside its config
// (<config>.seq), and sends it with every query as the JQ-Min-Seq header,
// so the server answers only once its projection holds that write:
// `jqctl submit` then `jqctl get` always shows the submission.

// headerMinSeq is ingest's header for a query's minimum sequence.
const headerMinSeq = "JQ-Min-Seq"

// answerSeq is the highest sequence a write's answer names: "seq", or
// each item's for a multi-document submission.
func answerSeq(data []byte) uint64 {
	var a struct {
		Seq   uint64 `json:"seq"`
		Items []struct {
			Seq uint64 `json:"seq"`
		} `json:"items"`
	}
	if json.Unmarshal(data, &a) != nil {
		return 0
	}
	seq := a.Seq
	for _, it := range a.Items {
		seq = max(seq, it.Seq)
	}
	return seq
}

// staleSeq says whether err is the server refusing the JQ-Min-Seq header
// (a sequence beyond its stream's end), in either error shape: API.md's
// body names the header as the field, a metav1.Status (every /apis/ read)
// as its cause's field.
func staleSeq(err error) bool {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusBadRequest && len(ae.Errors) == 1 && ae.Errors[0].Field == headerMinSeq
	}
	var se *statusError
	return errors.As(err, &se) && se.Code == http.StatusBadRequest && slices.Equal(se.Fields, []string{headerMinSeq})
}

// seqs is the file's content: the last write's sequence per server.
type seqs map[string]uint64

func readSeqs(file string) seqs {
	out := seqs{}
	data, err := os.ReadFile(file)
	if err != nil {
		return out
	}
	_ = json.Unmarshal(data, &out)
	return out
}

// lastSeq is the sequence queries to server must wait for; 0 for none.
func (c *client) lastSeq() uint64 {
	if c.seqFile == "" {
		return 0
	}
	return readSeqs(c.seqFile)[c.server]
}

// noteSeq records a write's sequence, keeping the highest.
func (c *client) noteSeq(seq uint64) error {
	if c.seqFile == "" || seq == 0 {
		return nil
	}
	all := readSeqs(c.seqFile)
	if all[c.server] >= seq {
		return nil
	}
	all[c.server] = seq
	return c.writeSeqs(all)
}

// forgetSeq drops the server's sequence: the server refused it as beyond
// its stream (a new server at the same address).
func (c *client) forgetSeq() error {
	all := readSeqs(c.seqFile)
	delete(all, c.server)
	return c.writeSeqs(all)
}

func (c *client) writeSeqs(all seqs) error {
	data, err := json.Marshal(all)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.seqFile), 0o700); err != nil {
		return err
	}
	tmp := c.seqFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, c.seqFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
