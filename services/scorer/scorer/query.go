package scorer

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go"
	"sigs.k8s.io/yaml"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/natsconf"
	"github.com/jetqueue/jetqueue/libs/scoring"
)

// SubjectScore answers ranking queries (request/reply, queue group
// "scorer"). The body is a SCORER.md vector, JSON or YAML: config, pod and
// nodes; its metadata and expectations (name, description, expected, …)
// are accepted and ignored. Without config the service's own is used,
// without nodes its inventory. The answer is SCORER.md's output line,
// {"ranking":[...]} with every node scored (feasible or not), best first,
// and a Status header of 200; or API.md's error body with 400 (invalid
// query), 403 (a request from another NATS account: fromAnotherAccount)
// or 503 (no inventory yet).
const SubjectScore = events.SubjectScore

// queryKeys are the keys a vector file may hold.
var queryKeys = []string{"name", "description", "source", "tags", "comment",
	"config", "pod", "nodes", "expected", "expectedOrder"}

// fieldError is one entry of API.md's error body.
type fieldError struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Querier answers ranking queries against a default configuration and an
// inventory.
type Querier struct {
	Scorer    *scoring.Scorer
	Inventory *Inventory
	// observe, when set, sees the status of every answer.
	observe func(status int)
}

// Answer decides the reply to one query body: a status and a JSON body.
func (q *Querier) Answer(body []byte) (int, []byte) {
	status, v := q.answer(body)
	out, _ := json.Marshal(v)
	return status, out
}

func (q *Querier) answer(body []byte) (int, any) {
	bad := func(errs ...fieldError) (int, any) {
		return http.StatusBadRequest, struct {
			Errors []fieldError `json:"errors"`
		}{errs}
	}
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return bad(fieldError{Message: fmt.Sprintf("not JSON or YAML: %v", err)})
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil || top == nil {
		return bad(fieldError{Message: "want an object with pod and optionally config and nodes"})
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !slices.Contains(queryKeys, k) {
			return bad(fieldError{Field: k, Message: "unknown field"})
		}
	}
	wire := func(err error) (int, any) {
		if we := (*scoring.WireError)(nil); errors.As(err, &we) {
			return bad(fieldError{Field: we.Field, Message: we.Detail})
		}
		return bad(fieldError{Message: err.Error()})
	}
	sc := q.Scorer
	if raw := top["config"]; raw != nil {
		cfg, err := scoring.DecodeConfig(raw)
		if err != nil {
			return wire(err)
		}
		if sc, err = scoring.New(cfg); err != nil {
			var errs []fieldError
			for _, e := range flatten(err) {
				if fe := (*scoring.FieldError)(nil); errors.As(e, &fe) {
					errs = append(errs, fieldError{Field: fe.Field, Message: fe.Detail})
				} else {
					errs = append(errs, fieldError{Field: "config", Message: e.Error()})
				}
			}
			return bad(errs...)
		}
	}
	if top["pod"] == nil {
		return bad(fieldError{Field: "pod", Message: "required"})
	}
	pod, err := scoring.DecodePod(top["pod"])
	if err != nil {
		return wire(err)
	}
	var nodes []scoring.Node
	if raw := top["nodes"]; raw != nil {
		if nodes, err = scoring.DecodeNodes(raw); err != nil {
			return wire(err)
		}
	} else {
		if !q.Inventory.Synced() {
			return http.StatusServiceUnavailable, struct {
				Errors []fieldError `json:"errors"`
			}{[]fieldError{{Message: "node inventory not synced yet"}}}
		}
		nodes = q.Inventory.Nodes()
	}
	return http.StatusOK, struct {
		Ranking []scoring.NodeScore `json:"ranking"`
	}{sc.Rank(&pod, nodes)}
}

// fromAnotherAccount tells whether a request crossed a service import:
// the NATS server stamps Nats-Request-Info on such a request, and on no
// other (a client's own value is replaced when it crosses one).
//
// The scorer answers with the whole node inventory and has no RBAC policy
// of its own, and there is no HTTP twin whose authorization it could
// share. So it answers jetqueue's own account only: libs/natsconf exports
// ingest's API to the namespaces' accounts, not jq.api.v1.score, and a
// configuration written by hand that exports it still gets a refusal
// here rather than the inventory. Inside jetqueue's account no service
// user may publish on jq.api.v1.> (natsconf), so a header is never the
// word of a client there either.
func fromAnotherAccount(m *nats.Msg) bool {
	return m.Header.Get(natsconf.RequestInfoHeader) != ""
}

// refused is the answer to a request from another account.
func refused() (int, []byte) {
	body, _ := json.Marshal(struct {
		Errors []fieldError `json:"errors"`
	}{[]fieldError{{Message: SubjectScore + " answers jetqueue's own services only, not another NATS account"}}})
	return http.StatusForbidden, body
}

// serve answers SubjectScore in the "scorer" queue group.
func (q *Querier) serve(nc *nats.Conn) (*nats.Subscription, error) {
	return nc.QueueSubscribe(SubjectScore, "scorer", func(m *nats.Msg) {
		status, body := refused()
		if !fromAnotherAccount(m) {
			status, body = q.Answer(m.Data)
		}
		if q.observe != nil {
			q.observe(status)
		}
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set("Status", strconv.Itoa(status))
		reply.Data = body
		_ = m.RespondMsg(reply)
	})
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
