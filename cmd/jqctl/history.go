package main

import (
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/spf13/cobra"
)

// addAtFlag adds --at: answer as the system stood at that time, from the
// event log (the server replays it up to there).
func addAtFlag(cmd *cobra.Command, at *string) {
	cmd.Flags().StringVar(at, "at", "", "answer as the system stood at this time (RFC 3339, e.g. 2026-01-01T10:00:00Z), replayed from the event log")
}

func atQuery(at string) string {
	if at == "" {
		return ""
	}
	return "?" + url.Values{"at": {at}}.Encode()
}

func explainQuery(at string, counterfactual bool) string {
	q := url.Values{}
	if at != "" {
		q.Set("at", at)
	}
	if counterfactual {
		q.Set("counterfactual", "true")
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// historyFields are what explain adds with --at and counterfactuals.
type historyFields struct {
	AsOf *struct {
		At   *time.Time `json:"at"`
		Seq  uint64     `json:"seq"`
		Time *time.Time `json:"time"`
	} `json:"asOf,omitempty"`
	Counterfactuals *struct {
		Outcome string `json:"outcome"`
		Changes []struct {
			Kind         string    `json:"kind"`
			Message      string    `json:"message"`
			AlsoAdmitted []refView `json:"alsoAdmitted"`
		} `json:"changes"`
		Exhausted bool `json:"exhausted"`
	} `json:"counterfactuals,omitempty"`
}

type refView = struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Hidden    bool   `json:"hidden"`
}

func (h historyFields) print(w io.Writer) {
	if a := h.AsOf; a != nil && a.At != nil {
		fmt.Fprintf(w, "As of:     %s (the log up to event %d)\n", a.At.UTC().Format(time.RFC3339Nano), a.Seq)
	}
	c := h.Counterfactuals
	if c == nil {
		return
	}
	switch c.Outcome {
	case "AdmittedWithoutChange":
		fmt.Fprintln(w, "Would be admitted now without any change (a decision is on its way).")
	case "Searched":
		if len(c.Changes) == 0 {
			fmt.Fprintln(w, "Changes:   none found that would admit it now")
			break
		}
		fmt.Fprintln(w, "Changes that would admit it now (each verified by the scheduler):")
		for _, ch := range c.Changes {
			fmt.Fprintf(w, "  - %s", ch.Message)
			if n := len(ch.AlsoAdmitted); n > 0 {
				fmt.Fprintf(w, "; %d other workload(s) admitted too", n)
			}
			fmt.Fprintln(w)
		}
		if c.Exhausted {
			fmt.Fprintln(w, "  (the search stopped at its probe limit; other changes may exist)")
		}
	}
}
