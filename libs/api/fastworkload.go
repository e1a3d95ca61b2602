package api

import (
	"bytes"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// The common Workload, read by hand.
//
// Most objects decoded are v1beta1 Workloads in one shape: metadata with a
// name, namespace, labels and annotations, and podSets of containers with
// resource requests and limits. readWorkload reads that shape straight
// into a Workload, as the strict typed decode (jsonv2 with fastOptions)
// would, without reflection. It takes only what it knows exactly: member
// names as written in the Go types' tags, plain strings (no escape, no
// control character), integers written as JSON integers, true and false,
// quantities as unmarshalQuantity takes them. At anything else (another
// member, a duplicate, null, a number written otherwise, text after the
// object) it gives up, and the typed decode reads the document as before.
// TestReadWorkloadAsTheTypedDecode and FuzzDecode check it.

// readWorkload reads a v1beta1 Workload, or answers ok=false.
func readWorkload(js []byte) (*Workload, bool) {
	r := wlReader{js: js}
	wl := &Workload{}
	var seen uint8
	ok := r.object(func(name []byte) bool {
		switch string(name) {
		case "apiVersion":
			return r.once(&seen, 1) && r.head(&wl.APIVersion)
		case "kind":
			return r.once(&seen, 2) && r.head(&wl.Kind)
		case "metadata":
			return r.once(&seen, 4) && r.meta(wl)
		case "spec":
			return r.once(&seen, 8) && r.spec(&wl.Spec)
		}
		return false
	})
	if !ok {
		return nil, false
	}
	r.ws()
	return wl, r.i == len(r.js)
}

type wlReader struct {
	js []byte
	i  int
}

// once reports whether the member of bit b is met for the first time.
func (r *wlReader) once(seen *uint8, b uint8) bool {
	if *seen&b != 0 {
		return false
	}
	*seen |= b
	return true
}

func (r *wlReader) ws() {
	for r.i < len(r.js) {
		switch r.js[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// is consumes c, after any blanks, if it comes next.
func (r *wlReader) is(c byte) bool {
	r.ws()
	if r.i < len(r.js) && r.js[r.i] == c {
		r.i++
		return true
	}
	return false
}

// plain reads a string without escapes or control characters.
func (r *wlReader) plain() ([]byte, bool) {
	r.ws()
	if r.i >= len(r.js) || r.js[r.i] != '"' {
		return nil, false
	}
	start := r.i + 1
	for j := start; j < len(r.js); j++ {
		switch c := r.js[j]; {
		case c == '"':
			r.i = j + 1
			return r.js[start:j], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

func (r *wlReader) str(dst *string) bool {
	s, ok := r.plain()
	*dst = string(s)
	return ok
}

// head is str for kind and apiVersion (headString).
func (r *wlReader) head(dst *string) bool {
	s, ok := r.plain()
	*dst = headString(s)
	return ok
}

// object reads a JSON object, calling member for each name; member reads
// the value.
func (r *wlReader) object(member func(name []byte) bool) bool {
	if !r.is('{') {
		return false
	}
	if r.is('}') {
		return true
	}
	for {
		name, ok := r.plain()
		if !ok || !r.is(':') || !member(name) {
			return false
		}
		if !r.is(',') {
			return r.is('}')
		}
	}
}

// array reads a JSON array, calling elem for each element.
func (r *wlReader) array(elem func() bool) bool {
	if !r.is('[') {
		return false
	}
	if r.is(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if !r.is(',') {
			return r.is(']')
		}
	}
}

// number reads a JSON number's text.
func (r *wlReader) number() ([]byte, bool) {
	r.ws()
	js, j := r.js, r.i
	digits := func() int {
		n := 0
		for j < len(js) && '0' <= js[j] && js[j] <= '9' {
			j++
			n++
		}
		return n
	}
	if j < len(js) && js[j] == '-' {
		j++
	}
	if j < len(js) && js[j] == '0' {
		j++
	} else if digits() == 0 {
		return nil, false
	}
	if j < len(js) && js[j] == '.' {
		j++
		if digits() == 0 {
			return nil, false
		}
	}
	if j < len(js) && (js[j] == 'e' || js[j] == 'E') {
		j++
		if j < len(js) && (js[j] == '+' || js[j] == '-') {
			j++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	if !r.delimited(j) {
		return nil, false
	}
	text := js[r.i:j]
	r.i = j
	return text, true
}

// delimited reports whether a literal or number ending at j is followed by
// what may follow a value.
func (r *wlReader) delimited(j int) bool {
	if j >= len(r.js) {
		return true
	}
	switch r.js[j] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// int32 reads an integer in int32's range written as a JSON integer.
func (r *wlReader) int32(dst *int32) bool {
	text, ok := r.number()
	if !ok || len(text) > 11 || bytes.ContainsAny(text, ".eE") || string(text) == "-0" {
		return false
	}
	var v int64
	for _, c := range bytes.TrimPrefix(text, []byte("-")) {
		v = v*10 + int64(c-'0')
	}
	if text[0] == '-' {
		v = -v
	}
	if v != int64(int32(v)) {
		return false
	}
	*dst = int32(v)
	return true
}

func (r *wlReader) bool(dst *bool) bool {
	r.ws()
	for _, lit := range []string{"true", "false"} {
		if bytes.HasPrefix(r.js[r.i:], []byte(lit)) && r.delimited(r.i+len(lit)) {
			r.i += len(lit)
			*dst = lit == "true"
			return true
		}
	}
	return false
}

// strings reads an object of strings into a new map.
func (r *wlReader) strings(dst *map[string]string) bool {
	m := map[string]string{}
	*dst = m
	return r.object(func(name []byte) bool {
		if _, dup := m[string(name)]; dup {
			return false
		}
		var v string
		if !r.str(&v) {
			return false
		}
		m[string(name)] = v
		return true
	})
}

func (r *wlReader) stringList(dst *[]string) bool {
	l := []string{}
	ok := r.array(func() bool {
		var s string
		if !r.str(&s) {
			return false
		}
		l = append(l, s)
		return true
	})
	*dst = l
	return ok
}

func (r *wlReader) meta(wl *Workload) bool {
	m := &wl.ObjectMeta
	var seen uint8
	return r.object(func(name []byte) bool {
		switch string(name) {
		case "name":
			return r.once(&seen, 1) && r.str(&m.Name)
		case "namespace":
			return r.once(&seen, 2) && r.str(&m.Namespace)
		case "generateName":
			return r.once(&seen, 4) && r.str(&m.GenerateName)
		case "labels":
			return r.once(&seen, 8) && r.strings(&m.Labels)
		case "annotations":
			return r.once(&seen, 16) && r.strings(&m.Annotations)
		case "uid":
			var uid string
			ok := r.once(&seen, 32) && r.str(&uid)
			m.UID = types.UID(uid)
			return ok
		}
		return false
	})
}

func (r *wlReader) spec(s *WorkloadSpec) bool {
	var seen uint8
	return r.object(func(name []byte) bool {
		switch string(name) {
		case "podSets":
			if !r.once(&seen, 1) {
				return false
			}
			s.PodSets = []PodSet{}
			return r.array(func() bool {
				s.PodSets = append(s.PodSets, PodSet{})
				return r.podSet(&s.PodSets[len(s.PodSets)-1])
			})
		case "queueName":
			return r.once(&seen, 2) && r.str(&s.QueueName)
		case "priorityClassName":
			return r.once(&seen, 4) && r.str(&s.PriorityClassName)
		case "priority":
			s.Priority = new(int32)
			return r.once(&seen, 8) && r.int32(s.Priority)
		case "priorityClassSource":
			return r.once(&seen, 16) && r.str(&s.PriorityClassSource)
		case "active":
			s.Active = new(bool)
			return r.once(&seen, 32) && r.bool(s.Active)
		}
		return false
	})
}

func (r *wlReader) podSet(ps *PodSet) bool {
	var seen uint8
	return r.object(func(name []byte) bool {
		switch string(name) {
		case "name":
			return r.once(&seen, 1) && r.str(&ps.Name)
		case "count":
			return r.once(&seen, 2) && r.int32(&ps.Count)
		case "minCount":
			ps.MinCount = new(int32)
			return r.once(&seen, 4) && r.int32(ps.MinCount)
		case "template":
			// A PodTemplateSpec's members taken here: spec, and an empty
			// metadata (what encoding a Workload writes for none).
			var inTemplate uint8
			return r.once(&seen, 8) && r.object(func(name []byte) bool {
				switch string(name) {
				case "spec":
					return r.once(&inTemplate, 1) && r.podSpec(&ps.Template.Spec)
				case "metadata":
					return r.once(&inTemplate, 2) && r.object(func([]byte) bool { return false })
				}
				return false
			})
		}
		return false
	})
}

func (r *wlReader) podSpec(spec *corev1.PodSpec) bool {
	var seen uint8
	return r.object(func(name []byte) bool {
		switch string(name) {
		case "containers":
			return r.once(&seen, 1) && r.containers(&spec.Containers)
		case "initContainers":
			return r.once(&seen, 2) && r.containers(&spec.InitContainers)
		}
		return false
	})
}

func (r *wlReader) containers(dst *[]corev1.Container) bool {
	cs := []corev1.Container{}
	ok := r.array(func() bool {
		cs = append(cs, corev1.Container{})
		return r.container(&cs[len(cs)-1])
	})
	*dst = cs
	return ok
}

func (r *wlReader) container(c *corev1.Container) bool {
	var seen uint8
	return r.object(func(name []byte) bool {
		switch string(name) {
		case "name":
			return r.once(&seen, 1) && r.str(&c.Name)
		case "image":
			return r.once(&seen, 2) && r.str(&c.Image)
		case "command":
			return r.once(&seen, 4) && r.stringList(&c.Command)
		case "args":
			return r.once(&seen, 8) && r.stringList(&c.Args)
		case "resources":
			if !r.once(&seen, 16) {
				return false
			}
			var rs uint8
			return r.object(func(name []byte) bool {
				switch string(name) {
				case "requests":
					return r.once(&rs, 1) && r.resources(&c.Resources.Requests)
				case "limits":
					return r.once(&rs, 2) && r.resources(&c.Resources.Limits)
				}
				return false
			})
		}
		return false
	})
}

// resources reads a ResourceList; each quantity as unmarshalQuantity reads
// it.
func (r *wlReader) resources(dst *corev1.ResourceList) bool {
	l := corev1.ResourceList{}
	*dst = l
	return r.object(func(name []byte) bool {
		if _, dup := l[corev1.ResourceName(name)]; dup {
			return false
		}
		r.ws()
		var raw, text []byte
		if r.i < len(r.js) && r.js[r.i] == '"' {
			start := r.i
			s, ok := r.plain()
			if !ok {
				return false
			}
			raw, text = r.js[start:r.i], s
		} else {
			n, ok := r.number()
			if !ok {
				return false
			}
			raw, text = n, n
		}
		if len(text) > MaxQuantityLength || (bytes.IndexAny(text, "eE") >= 0 && quantityOverBounds(string(text))) {
			return false
		}
		var q resource.Quantity
		if q.UnmarshalJSON(raw) != nil {
			return false
		}
		l[resourceName(name)] = q
		return true
	})
}

// resourceName is corev1.ResourceName(name), without a copy for the
// resources most requested.
func resourceName(name []byte) corev1.ResourceName {
	switch string(name) {
	case "cpu":
		return corev1.ResourceCPU
	case "memory":
		return corev1.ResourceMemory
	case "nvidia.com/gpu":
		return "nvidia.com/gpu"
	}
	return corev1.ResourceName(name)
}
