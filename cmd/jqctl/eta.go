package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// etaView is a pending workload's estimate (GET /v1/eta, ?eta=true, explain).
type etaView struct {
	At          *time.Time `json:"at"`
	WaitSeconds *float64   `json:"waitSeconds,omitempty"`
	Assumption  string     `json:"assumption"`
	Runtime     struct {
		Seconds float64 `json:"seconds"`
		Basis   string  `json:"basis"`
	} `json:"runtime"`
}

// etaCell is the ETA column of get -o wide: the time, and the wait from
// when it was computed; "-" when none.
func etaCell(e *etaView) string {
	if e == nil {
		return "-"
	}
	if e.At == nil {
		return "unknown"
	}
	s := e.At.UTC().Format(time.RFC3339)
	if e.WaitSeconds != nil {
		s += " (in " + (time.Duration(*e.WaitSeconds) * time.Second).String() + ")"
	}
	return s
}

// printETA is explain's ETA lines.
func printETA(w io.Writer, e *etaView) {
	if e == nil {
		return
	}
	fmt.Fprintf(w, "ETA:       %s\n", etaCell(e))
	fmt.Fprintf(w, "           %s\n", e.Assumption)
}

// workloadETAs holds, for get workloads -o wide, each pending workload's
// estimate by namespace/name (GET /v1/eta); nil when not asked for.
var workloadETAs map[string]*etaView

// loadETAs reads the ETAs of the pending workloads of a namespace (""
// for every one the caller may list). Without them (an error) the column
// says "-" and a note goes to errOut.
func loadETAs(c *client, namespace string, errOut io.Writer) {
	workloadETAs = map[string]*etaView{}
	for offset := 0; ; {
		q := url.Values{"limit": {"1000"}, "offset": {strconv.Itoa(offset)}}
		if namespace != "" {
			q.Set("namespace", namespace)
		}
		var page struct {
			Items []struct {
				Namespace string   `json:"namespace"`
				Name      string   `json:"name"`
				ETA       *etaView `json:"eta"`
			} `json:"items"`
			Total int `json:"total"`
		}
		if err := c.do("GET", "/v1/eta?"+q.Encode(), "", nil, &page); err != nil {
			fmt.Fprintf(errOut, "no ETAs: %v\n", err)
			return
		}
		for _, it := range page.Items {
			workloadETAs[it.Namespace+"/"+it.Name] = it.ETA
		}
		offset += len(page.Items)
		if len(page.Items) == 0 || offset >= page.Total {
			return
		}
	}
}

// etaColumn is a workload's ETA cell in get -o wide.
func etaColumn(u *unstructured.Unstructured) string {
	return etaCell(workloadETAs[u.GetNamespace()+"/"+u.GetName()])
}

// assumptionColumn is the assumption a workload's ETA rests on, in get
// -o wide.
func assumptionColumn(u *unstructured.Unstructured) string {
	return assumptionCell(workloadETAs[u.GetNamespace()+"/"+u.GetName()])
}

// assumptionCell is an estimate's assumption; "-" when none.
func assumptionCell(e *etaView) string {
	if e == nil || e.Assumption == "" {
		return "-"
	}
	return e.Assumption
}
