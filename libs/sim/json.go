package sim

import (
	"encoding/json"
	"slices"
	"strconv"
)

// AppendJSON appends the checkpoint as encoding/json's Encoder writes it
// (fields in order, map keys sorted, HTML-safe escaping, a final newline),
// byte for byte, without reflection: on a large scenario encoding the
// state lines cost more than deciding.
func (cp *Checkpoint) AppendJSON(b []byte) []byte {
	b = append(b, `{"step":`...)
	b = strconv.AppendInt(b, int64(cp.Step), 10)
	b = append(b, `,"admitted":`...)
	if cp.Admitted == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for i, key := range sortedKeys(cp.Admitted) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, key)
			b = append(b, ':')
			podSets := cp.Admitted[key]
			if podSets == nil {
				b = append(b, "null"...)
				continue
			}
			b = append(b, '{')
			for j, ps := range sortedKeys(podSets) {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendString(b, ps)
				b = append(b, ':')
				b = appendStringMap(b, podSets[ps])
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	b = append(b, `,"pending":`...)
	b = appendStrings(b, cp.Pending)
	b = append(b, `,"evicted":`...)
	b = appendStringMap(b, cp.Evicted)
	b = append(b, `,"inactive":`...)
	b = appendStrings(b, cp.Inactive)
	b = append(b, `,"finished":`...)
	b = appendStrings(b, cp.Finished)
	return append(b, "}\n"...)
}

func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func appendStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, m[k])
	}
	return append(b, '}')
}

// appendString writes printable ASCII that needs no escape as is and
// leaves every other string to encoding/json, whose escaping it must match.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
