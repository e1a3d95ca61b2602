package api

import jsonv2 "github.com/go-json-experiment/json"

// DecodeStored decodes a Workload as ingest stored it in a
// WorkloadSubmitted event. Ingest validated and encoded it before
// publishing, so a plain typed decode is enough: no defaulting, no
// validation, members it does not know are ignored. Every decider folds
// every submission through it, so it uses encoding/json/v2's decode:
// BenchmarkDecodeStored measures it against encoding/json's (1.8 times
// faster on this machine).
func DecodeStored(raw []byte) (*Workload, error) {
	wl := &Workload{}
	if err := jsonv2.Unmarshal(raw, wl); err != nil {
		return nil, err
	}
	return wl, nil
}
