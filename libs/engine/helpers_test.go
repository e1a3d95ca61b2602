package engine

import (
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
)

// decodeValid decodes YAML and validates every object, failing the test
// on any error.
func decodeValid(t testing.TB, yaml string) []api.Object {
	t.Helper()
	objs, err := api.Decode([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := api.Validate(o); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

// apply applies YAML configuration.
func apply(t testing.TB, e *Engine, yaml string) {
	t.Helper()
	for _, o := range decodeValid(t, yaml) {
		if _, err := e.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
}

var lastCreated = t0

// submit submits workloads, each created 1ms after the previous one.
func submit(t testing.TB, e *Engine, yaml string) {
	t.Helper()
	for _, o := range decodeValid(t, yaml) {
		lastCreated = lastCreated.Add(time.Millisecond)
		if _, err := e.Submit(o.(*api.Workload), lastCreated); err != nil {
			t.Fatal(err)
		}
	}
}
