package api

import jsonv2 "github.com/go-json-experiment/json"

// DecodeStored decodes a Workload as ingest stored it in a
// WorkloadSubmitted event. Ingest validated and encoded it before
// publishing, so a plain typed decode is enough: no defaulting, no
// validation, members it does not know are ignored. Every decider folds
// every submission through it, so it reads the common shape by hand
// (readWorkload, which gives the typed decode's result or gives up) and
// decodes anything else with encoding/json/v2. BenchmarkDecodeStored
// measures it against encoding/json's decode in the same run.
func DecodeStored(raw []byte) (*Workload, error) {
	if wl, ok := readWorkload(raw); ok {
		return wl, nil
	}
	wl := &Workload{}
	if err := jsonv2.Unmarshal(raw, wl); err != nil {
		return nil, err
	}
	return wl, nil
}
