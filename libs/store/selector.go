package store

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// A list of workloads with a label or field selector is answered by one
// query that evaluates the selector itself. Matched after reading, a
// selector that keeps few rows made the reader fetch page after page
// (with limit=1, one query per row) to fill one answer.

// Op is the operator of one selector requirement, as apimachinery's
// labels and fields name them.
type Op string

const (
	OpIn           Op = "in"    // =, ==, in: the value is one of Values
	OpNotIn        Op = "notin" // !=, notin: absent, or none of Values
	OpExists       Op = "exists"
	OpDoesNotExist Op = "!"
	OpGreaterThan  Op = "gt" // the value is an integer greater than Values[0]
	OpLessThan     Op = "lt"
)

// Requirement is one term of a selector: on a label of the workload's
// metadata.labels, or on a field (one of WorkloadFields). A workload is
// selected when it meets every requirement of Filter.Match.
type Requirement struct {
	// Label, or Field; exactly one is set.
	Label, Field string
	Op           Op
	Values       []string
}

// WorkloadFields are the fields a selector may name, and the column each
// is read from (a Workload object shows the same values).
var WorkloadFields = map[string]string{
	"metadata.namespace": "namespace",
	"metadata.name":      "name",
	"status":             "status",
	"spec.queueName":     "local_queue",
	"clusterQueue":       "cluster_queue",
}

// labelsOf is a workload's labels in the projection (NULL without any).
const labelsOf = `(object->'metadata'->'labels')`

// integer is what strconv.ParseInt may accept in base 10: a label value
// Gt and Lt compare. Longer than int64 is left to the caller's check.
const integer = `'^[+-]?[0-9]{1,19}$'`

// matchSQL renders the requirements as conditions ANDed to a query,
// with their arguments numbered from $next.
func matchSQL(reqs []Requirement, next int) (string, []any, error) {
	var b strings.Builder
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(next+len(args)-1)
	}
	for _, r := range reqs {
		var value string
		switch {
		case r.Label != "" && r.Field == "":
			value = labelsOf + "->>" + arg(r.Label)
		case r.Field != "" && r.Label == "":
			col, ok := WorkloadFields[r.Field]
			if !ok {
				return "", nil, fmt.Errorf("field selector: unknown field %q", r.Field)
			}
			value = col
		default:
			return "", nil, fmt.Errorf("selector requirement: name a label or a field, not %q and %q", r.Label, r.Field)
		}
		switch r.Op {
		case OpIn:
			fmt.Fprintf(&b, " AND %s = ANY(%s::text[])", value, arg(r.Values))
		case OpNotIn:
			fmt.Fprintf(&b, " AND NOT coalesce(%s = ANY(%s::text[]), false)", value, arg(r.Values))
		case OpExists:
			fmt.Fprintf(&b, " AND %s IS NOT NULL", value)
		case OpDoesNotExist:
			fmt.Fprintf(&b, " AND %s IS NULL", value)
		case OpGreaterThan, OpLessThan:
			if len(r.Values) != 1 {
				return "", nil, fmt.Errorf("selector requirement %s %s: want one integer", value, r.Op)
			}
			if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
				return "", nil, fmt.Errorf("selector requirement %s %s: %w", value, r.Op, err)
			}
			cmp := ">"
			if r.Op == OpLessThan {
				cmp = "<"
			}
			// CASE, not AND: PostgreSQL may evaluate an AND's operands
			// in any order, and the cast fails on a value that is not
			// an integer.
			fmt.Fprintf(&b, " AND CASE WHEN %[1]s ~ %[2]s THEN (%[1]s)::numeric %[3]s %[4]s::numeric ELSE false END",
				value, integer, cmp, arg(r.Values[0]))
		default:
			return "", nil, fmt.Errorf("selector requirement: unknown operator %q", r.Op)
		}
	}
	return b.String(), args, nil
}

// Cursor is the cursor of the page that starts after the workload
// ns/name, for a reader that stops within a page it was given.
func Cursor(ns, name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(ns + "\x00" + name))
}
