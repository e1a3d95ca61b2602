package engine

import (
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
)

// apply decodes, validates and applies YAML configuration.
func apply(t testing.TB, e *Engine, yaml string) {
	t.Helper()
	objs, err := api.Decode([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := api.Validate(o); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
}

var lastCreated = t0

// submit decodes and submits workloads, each 1ms after the previous one.
func submit(t testing.TB, e *Engine, yaml string) {
	t.Helper()
	objs, err := api.Decode([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := api.Validate(o); err != nil {
			t.Fatal(err)
		}
		lastCreated = lastCreated.Add(time.Millisecond)
		if _, err := e.Submit(o.(*api.Workload), lastCreated); err != nil {
			t.Fatal(err)
		}
	}
}

// statuses returns the status of every workload by key.
func statuses(e *Engine) map[string]Status {
	out := map[string]Status{}
	for k, w := range e.Workloads() {
		out[k] = w.Status
	}
	return out
}
