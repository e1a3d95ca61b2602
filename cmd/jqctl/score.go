package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/jetqueue/jetqueue/libs/scoring"
)

func newScore(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "score FILE...",
		Short: "Rank nodes for one pod with the scorer's NodeResourcesFitPlus + ScarceResourceAvoidance",
		Long: `score reads each scorer vector (shared/conformance/SCORER.md, JSON or YAML)
and prints one JSON line per file, best node first:
  {"ranking":[{"node":..,"fitPlus":..,"scarce":..,"total":..}]}
When the file has "expected" (per node; fitPlus, scarce and total are each
optional) or "expectedOrder" (the whole ranking, by node name), they are
checked and every difference is printed to stderr.

Exit status: 0 when every check passes, 1 on any mismatch, 2 when a file is
unreadable or invalid (the message names the file, then the field).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			code := 0
			for _, f := range files {
				code = max(code, scoreFile(f, stdout, stderr))
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}

func scoreFile(path string, stdout, stderr io.Writer) int {
	fail := func(errs ...error) int {
		for _, err := range errs {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
		}
		return 2
	}
	data, err := os.ReadFile(path)
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return fail(pe.Err) // the path is already the prefix
	} else if err != nil {
		return fail(err)
	}
	v, err := parseVector(data)
	if err != nil {
		return fail(err)
	}
	s, err := scoring.New(v.config)
	if err != nil {
		// Validate reports every bad field; print one per line.
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			return fail(joined.Unwrap()...)
		}
		return fail(err)
	}
	ranking := s.Rank(&v.pod, v.nodes)
	if err := json.NewEncoder(stdout).Encode(struct {
		Ranking []scoring.NodeScore `json:"ranking"`
	}{ranking}); err != nil {
		return fail(err)
	}
	mismatches := v.check(ranking)
	for _, m := range mismatches {
		fmt.Fprintf(stderr, "%s: %s\n", path, m)
	}
	if len(mismatches) > 0 {
		return 1
	}
	return 0
}

// vector is one parsed scorer file.
type vector struct {
	config        scoring.Config
	pod           scoring.Pod
	nodes         []scoring.Node
	expected      map[string]expectedScore
	expectedOrder []string // nil: not checked
}

// expectedScore holds the checked values; nil is not checked.
type expectedScore struct {
	FitPlus, Scarce, Total *int64
}

// check compares the ranking with the file's expectations, as plain text
// that stays stable across library versions.
func (v *vector) check(ranking []scoring.NodeScore) []string {
	var out []string
	byNode := make(map[string]scoring.NodeScore, len(ranking))
	order := make([]string, len(ranking))
	for i, r := range ranking {
		byNode[r.Node] = r
		order[i] = r.Node
	}
	for _, node := range sortedNames(v.expected) {
		want := v.expected[node]
		got, ok := byNode[node]
		if !ok {
			out = append(out, fmt.Sprintf("expected[%s]: no node of that name", node))
			continue
		}
		for _, f := range []struct {
			name string
			want *int64
			got  int64
		}{{"fitPlus", want.FitPlus, got.FitPlus}, {"scarce", want.Scarce, got.Scarce}, {"total", want.Total, got.Total}} {
			if f.want != nil && *f.want != f.got {
				out = append(out, fmt.Sprintf("expected[%s].%s: want %d, got %d", node, f.name, *f.want, f.got))
			}
		}
	}
	if v.expectedOrder != nil && !slices.Equal(v.expectedOrder, order) {
		msg := fmt.Sprintf("expectedOrder: want [%s], got [%s]", strings.Join(v.expectedOrder, " "), strings.Join(order, " "))
		for i := range max(len(order), len(v.expectedOrder)) {
			w, g := at(v.expectedOrder, i), at(order, i)
			if w != g {
				msg += fmt.Sprintf(" (first difference at position %d: want %s, got %s)", i, w, g)
				break
			}
		}
		out = append(out, msg)
	}
	return out
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

func sortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// wireError keeps a scoring.WireError's field and detail.
func wireError(err error) error {
	if we := (*scoring.WireError)(nil); errors.As(err, &we) {
		return &fieldError{we.Field, we.Detail}
	}
	return err
}

// fieldError names where in the file a problem is.
type fieldError struct{ path, msg string }

func (e *fieldError) Error() string { return e.path + ": " + e.msg }

func errAt(path, format string, args ...any) error {
	if path == "" {
		path = "(top level)"
	}
	return &fieldError{path, fmt.Sprintf(format, args...)}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// object decodes a JSON object; with allowed keys, any other key is an
// error, so a misspelt field cannot silently go unchecked. null is empty.
func object(raw json.RawMessage, path string, allowed ...string) (map[string]json.RawMessage, error) {
	if raw == nil {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errAt(path, "want an object")
	}
	if allowed != nil {
		for _, k := range sortedNames(m) {
			if !slices.Contains(allowed, k) {
				return nil, errAt(join(path, k), "unknown field")
			}
		}
	}
	return m, nil
}

// decode reads one value strictly; absent (nil) leaves v unchanged.
func decode(raw json.RawMessage, path, want string, v any) error {
	if raw == nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return errAt(path, "want %s, got %s", want, raw)
	}
	return nil
}

// metadata keys are free text for people; only "comment" is not in the
// public vectors, it holds the hand arithmetic of ours.
var vectorKeys = []string{"name", "description", "source", "tags", "comment",
	"config", "pod", "nodes", "expected", "expectedOrder"}

func parseVector(data []byte) (*vector, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, errAt("(file)", "not JSON or YAML: %v", err)
	}
	top, err := object(js, "", vectorKeys...)
	if err != nil {
		return nil, err
	}
	if top == nil {
		return nil, errAt("(file)", "empty")
	}
	v := &vector{}
	if v.config, err = scoring.DecodeConfig(top["config"]); err != nil {
		return nil, wireError(err)
	}
	if v.pod, err = scoring.DecodePod(top["pod"]); err != nil {
		return nil, wireError(err)
	}
	if v.nodes, err = scoring.DecodeNodes(top["nodes"]); err != nil {
		return nil, wireError(err)
	}
	if v.expected, err = parseExpected(top["expected"]); err != nil {
		return nil, err
	}
	if err := decode(top["expectedOrder"], "expectedOrder", "a list of node names", &v.expectedOrder); err != nil {
		return nil, err
	}
	return v, nil
}

func parseExpected(raw json.RawMessage) (map[string]expectedScore, error) {
	m, err := object(raw, "expected")
	if err != nil {
		return nil, err
	}
	out := make(map[string]expectedScore, len(m))
	for _, node := range sortedNames(m) {
		path := fmt.Sprintf("expected[%s]", node)
		e, err := object(m[node], path, "fitPlus", "scarce", "total")
		if err != nil {
			return nil, err
		}
		var want expectedScore
		for _, f := range []struct {
			key string
			dst **int64
		}{{"fitPlus", &want.FitPlus}, {"scarce", &want.Scarce}, {"total", &want.Total}} {
			if err := decode(e[f.key], path+"."+f.key, "an integer", f.dst); err != nil {
				return nil, err
			}
		}
		out[node] = want
	}
	return out, nil
}
