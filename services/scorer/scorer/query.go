package scorer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scoring"
)

// SubjectScore answers ranking queries (request/reply, queue group
// "scorer"). The body is a SCORER.md vector, JSON or YAML: config, pod and
// nodes; its metadata and expectations (name, description, expected, …)
// are accepted and ignored. Without config the service's own is used,
// without nodes its inventory. The answer is SCORER.md's output line,
// {"ranking":[...]} with every node scored (feasible or not), best first,
// and a Status header of 200; or API.md's error body with 400 (invalid
// query) or 503 (no inventory yet).
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
	sc := q.Scorer
	if raw := top["config"]; raw != nil {
		cfg, fe := decodeConfig(raw)
		if fe != nil {
			return bad(*fe)
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
	pod, fe := decodePod(top["pod"])
	if fe != nil {
		return bad(*fe)
	}
	var nodes []scoring.Node
	if raw := top["nodes"]; raw != nil {
		if nodes, fe = decodeNodes(raw); fe != nil {
			return bad(*fe)
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

// serve answers SubjectScore in the "scorer" queue group.
func (q *Querier) serve(nc *nats.Conn) (*nats.Subscription, error) {
	return nc.QueueSubscribe(SubjectScore, "scorer", func(m *nats.Msg) {
		status, body := q.Answer(m.Data)
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

// object decodes a JSON object whose keys must be among allowed (any key
// when allowed is empty); null is an empty object.
func object(raw json.RawMessage, path string, allowed ...string) (map[string]json.RawMessage, *fieldError) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &fieldError{Field: path, Message: "want an object"}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if len(allowed) > 0 && !slices.Contains(allowed, k) {
			return nil, &fieldError{Field: path + "." + k, Message: "unknown field"}
		}
	}
	return m, nil
}

// value decodes one field; absent leaves v as it is.
func value(raw json.RawMessage, path string, v any) *fieldError {
	if raw == nil {
		return nil
	}
	if err := strictJSON(raw, v); err != nil {
		fe := jsonError(path, err)
		return &fe
	}
	return nil
}

// decodeConfig reads SCORER.md's config, naming fields as scoring's
// validation does: config.fitPlus[cpu].weight.
func decodeConfig(raw json.RawMessage) (scoring.Config, *fieldError) {
	var cfg scoring.Config
	top, fe := object(raw, "config", "fitPlus", "scarce", "pluginWeights")
	if fe != nil {
		return cfg, fe
	}
	if top["fitPlus"] != nil {
		fit, fe := object(top["fitPlus"], "config.fitPlus")
		if fe != nil {
			return cfg, fe
		}
		cfg.FitPlus = make(map[corev1.ResourceName]scoring.ResourcesType, len(fit))
		for _, name := range slices.Sorted(maps.Keys(fit)) {
			path := fmt.Sprintf("config.fitPlus[%s]", name)
			e, fe := object(fit[name], path, "type", "weight")
			if fe != nil {
				return cfg, fe
			}
			var rt scoring.ResourcesType
			if fe := value(e["type"], path+".type", &rt.Type); fe != nil {
				return cfg, fe
			}
			if fe := value(e["weight"], path+".weight", &rt.Weight); fe != nil {
				return cfg, fe
			}
			cfg.FitPlus[corev1.ResourceName(name)] = rt
		}
	}
	if fe := value(top["scarce"], "config.scarce", &cfg.Scarce); fe != nil {
		return cfg, fe
	}
	if top["pluginWeights"] != nil {
		pw, fe := object(top["pluginWeights"], "config.pluginWeights")
		if fe != nil {
			return cfg, fe
		}
		cfg.PluginWeights = make(map[string]int64, len(pw))
		for _, name := range slices.Sorted(maps.Keys(pw)) {
			var w int64
			if fe := value(pw[name], fmt.Sprintf("config.pluginWeights[%s]", name), &w); fe != nil {
				return cfg, fe
			}
			cfg.PluginWeights[name] = w
		}
	}
	return cfg, nil
}

// jsonError renders a decoding error without Go type names.
func jsonError(path string, err error) fieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			path += "." + te.Field
		}
		want := "a " + te.Type.Kind().String()
		switch te.Type.Kind() {
		case reflect.Map, reflect.Struct:
			want = "an object"
		case reflect.Slice, reflect.Array:
			want = "a list"
		case reflect.Int, reflect.Int32, reflect.Int64:
			want = "an integer"
		}
		return fieldError{Field: path, Message: fmt.Sprintf("want %s, got %s", want, te.Value)}
	}
	return fieldError{Field: path, Message: strings.TrimPrefix(err.Error(), "json: ")}
}

func strictJSON(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// decodePod reads SCORER.md's pod: requests, and optional containers whose
// keys decide the cpu/memory defaults.
func decodePod(raw json.RawMessage) (scoring.Pod, *fieldError) {
	var pod scoring.Pod
	if raw == nil {
		return pod, &fieldError{Field: "pod", Message: "required"}
	}
	m, fe := object(raw, "pod", "requests", "containers")
	if fe != nil {
		return pod, fe
	}
	if pod.Requests, fe = quantities(m["requests"], "pod.requests"); fe != nil {
		return pod, fe
	}
	if m["containers"] == nil {
		return pod, nil
	}
	var containers []json.RawMessage
	if fe := value(m["containers"], "pod.containers", &containers); fe != nil {
		return pod, fe
	}
	pod.Containers = make([]scoring.Resources, len(containers))
	for i, c := range containers {
		path := fmt.Sprintf("pod.containers[%d]", i)
		cm, fe := object(c, path, "name", "requests")
		if fe != nil {
			return pod, fe
		}
		if pod.Containers[i], fe = quantities(cm["requests"], path+".requests"); fe != nil {
			return pod, fe
		}
	}
	return pod, nil
}

func quantities(raw json.RawMessage, path string) (scoring.Resources, *fieldError) {
	if raw == nil {
		return scoring.Resources{}, nil
	}
	var q scoring.Quantities
	if err := json.Unmarshal(raw, &q); err != nil {
		if qe := (*scoring.QuantityError)(nil); errors.As(err, &qe) {
			return nil, &fieldError{Field: fmt.Sprintf("%s[%s]", path, qe.Resource), Message: qe.Err.Error()}
		}
		return nil, &fieldError{Field: path, Message: strings.TrimPrefix(err.Error(), ": ")}
	}
	return scoring.NewResources(corev1.ResourceList(q)), nil
}

// decodeNodes reads SCORER.md's nodes; an entry's pods (what requested was
// derived from) are accepted and not re-derived.
func decodeNodes(raw json.RawMessage) ([]scoring.Node, *fieldError) {
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, &fieldError{Field: "nodes", Message: "want a list of nodes"}
	}
	nodes := make([]scoring.Node, len(list))
	seen := map[string]int{}
	for i, m := range list {
		path := fmt.Sprintf("nodes[%d]", i)
		delete(m, "pods")
		data, _ := json.Marshal(m)
		s, err := scoring.DecodeNodeState(data)
		if err != nil {
			return nil, &fieldError{Field: path, Message: err.Error()}
		}
		if j, dup := seen[s.Name]; dup {
			return nil, &fieldError{Field: path + ".name", Message: fmt.Sprintf("%q already names nodes[%d]", s.Name, j)}
		}
		seen[s.Name] = i
		nodes[i] = s.Node()
	}
	return nodes, nil
}
