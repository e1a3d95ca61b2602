// Package yamljson writes one YAML document as JSON text in a single pass
// over its bytes, for the block style that Kueue manifests and jetqueue
// scenarios are written in.
//
// It is an accelerator in front of sigs.k8s.io/yaml, never a judge. It takes
// block mappings and sequences, plain, single- and double-quoted scalars on
// one line, the empty flow collections {} and [], and comments. It refuses,
// with ErrUnsupported, the first thing it is not certain yaml.v2 reads the
// same way: anchors, aliases, tags, block and multi-line scalars, flow
// collections with content, escapes, tabs, carriage returns, directives,
// duplicate keys, and plain scalars that YAML 1.1 could resolve to something
// other than a string or a decimal integer (yes, on, ~, 0x1f, 1e3, 1.5,
// 2026-01-01 and the like). The caller then reads the document with
// sigs.k8s.io/yaml, which names every error. FuzzAgrees checks that whatever
// Append accepts, sigs.k8s.io/yaml's YAMLToJSONStrict reads as the same
// value.
//
// The cost is one scan of the input and an output of a few times its size
// at most, whatever the input holds: no node tree, no generic map.
package yamljson

import (
	"bytes"
	"errors"
	"unicode/utf8"
)

// ErrUnsupported is returned for a document outside the subset: read it
// with sigs.k8s.io/yaml instead.
var ErrUnsupported = errors.New("yamljson: outside the block subset")

// MaxDepth bounds the nesting of collections; deeper documents go to the
// reference reader.
const MaxDepth = 256

// maxKey is the longest key, from its first character to its colon, that
// yaml.v2 reads as a key: its scanner drops a possible simple key once it
// is more than 1024 characters behind, and then refuses the document. A
// longer key goes to the reference, which names the error. Counting bytes,
// never fewer than characters, keeps the cut on the safe side.
const maxKey = 1024

// Append appends the JSON text of the YAML document src to dst. A document
// with no content (blank lines and comments only) appends nothing. The root
// must be a mapping. Keys are written in document order.
func Append(dst, src []byte) ([]byte, error) {
	if !clean(src) {
		return dst, ErrUnsupported
	}
	p := parser{src: src, out: dst}
	p.next()
	if !p.ok {
		return dst, nil
	}
	if isItem(p.txt) {
		return dst, ErrUnsupported
	}
	if err := p.mapping(p.ind, 0); err != nil {
		return dst, err
	}
	if p.ok {
		return dst, ErrUnsupported // a line less indented than the root
	}
	return p.out, nil
}

// clean reports whether src holds only what the subset reads: valid UTF-8
// with no control character but the newline, no tab, no byte-order mark and
// none of the characters YAML 1.1 counts as line breaks (NEL, LS, PS) or
// refuses as unprintable.
func clean(src []byte) bool {
	for i := 0; i < len(src); {
		c := src[i]
		if plainASCII[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			return false
		}
		r, n := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError || r < 0xa0 || r == 0x2028 || r == 0x2029 || r == 0xfeff ||
			(r >= 0xd800 && r < 0xe000) || r == 0xfffe || r == 0xffff {
			return false
		}
		i += n
	}
	return true
}

// plainASCII marks the bytes clean passes at once: printable ASCII and the
// newline.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	t['\n'] = true
	return t
}()

// parser holds the current line: ind spaces, then txt (trailing spaces
// cut); ok is false past the last line.
type parser struct {
	src []byte
	pos int
	ind int
	txt []byte
	ok  bool
	out []byte
	// keys holds the keys of the mappings being read, innermost last.
	keys [][]byte
}

// next moves to the next line that holds more than spaces or a comment.
func (p *parser) next() {
	for p.pos < len(p.src) {
		end := bytes.IndexByte(p.src[p.pos:], '\n')
		var line []byte
		if end < 0 {
			line, p.pos = p.src[p.pos:], len(p.src)
		} else {
			line, p.pos = p.src[p.pos:p.pos+end], p.pos+end+1
		}
		ind := 0
		for ind < len(line) && line[ind] == ' ' {
			ind++
		}
		txt := bytes.TrimRight(line[ind:], " ")
		if len(txt) == 0 || txt[0] == '#' {
			continue
		}
		p.ind, p.txt, p.ok = ind, txt, true
		return
	}
	p.ok = false
}

// isItem reports whether a line's text starts a sequence item.
func isItem(txt []byte) bool {
	return txt[0] == '-' && (len(txt) == 1 || txt[1] == ' ')
}

// node writes the value of a key or item whose line held nothing after it:
// a block nested deeper than indent, a sequence at the key's own indent
// (allowed under a mapping key), or null.
func (p *parser) node(indent int, underKey bool, depth int) error {
	switch {
	case !p.ok:
	case p.ind > indent:
		if isItem(p.txt) {
			return p.sequence(p.ind, depth)
		}
		return p.mapping(p.ind, depth)
	case p.ind == indent && underKey && isItem(p.txt):
		return p.sequence(indent, depth)
	}
	p.out = append(p.out, "null"...)
	return nil
}

// sequence writes the items at indent ind.
func (p *parser) sequence(ind, depth int) error {
	if depth >= MaxDepth {
		return ErrUnsupported
	}
	p.out = append(p.out, '[')
	for n := 0; p.ok && p.ind == ind && isItem(p.txt); n++ {
		if n > 0 {
			p.out = append(p.out, ',')
		}
		rest := p.txt[1:]
		k := 0
		for k < len(rest) && rest[k] == ' ' {
			k++
		}
		rest = rest[k:]
		switch {
		case len(rest) == 0 || rest[0] == '#':
			p.next()
			if err := p.node(ind, false, depth+1); err != nil {
				return err
			}
		case isItem(rest):
			return ErrUnsupported // "- - x": a compact nested sequence
		case keyEnd(rest) >= 0:
			// "- key: value": a mapping whose keys sit at the column
			// of this first one.
			p.ind, p.txt = ind+1+k, rest
			if err := p.mapping(p.ind, depth+1); err != nil {
				return err
			}
		default:
			if err := p.scalar(rest, depth+1); err != nil {
				return err
			}
			p.next()
		}
		if p.ok && p.ind > ind {
			return ErrUnsupported // a continuation line, or a stray indent
		}
	}
	p.out = append(p.out, ']')
	return nil
}

// mapping writes the keys at indent ind.
func (p *parser) mapping(ind, depth int) error {
	if depth >= MaxDepth {
		return ErrUnsupported
	}
	keys := p.keySet()
	defer keys.done()
	p.out = append(p.out, '{')
	for n := 0; p.ok && p.ind == ind; n++ {
		if isItem(p.txt) {
			return ErrUnsupported // an item where a key belongs
		}
		end := keyEnd(p.txt)
		if end < 0 {
			return ErrUnsupported
		}
		key, ok := parseKey(p.txt[:end])
		if !ok || !keys.add(key) {
			return ErrUnsupported
		}
		if n > 0 {
			p.out = append(p.out, ',')
		}
		p.out = appendString(p.out, key)
		p.out = append(p.out, ':')
		rest := bytes.TrimLeft(p.txt[end+1:], " ")
		if len(rest) == 0 || rest[0] == '#' {
			p.next()
			if err := p.node(ind, true, depth+1); err != nil {
				return err
			}
		} else {
			if err := p.scalar(rest, depth+1); err != nil {
				return err
			}
			p.next()
		}
		if p.ok && p.ind > ind {
			return ErrUnsupported
		}
	}
	p.out = append(p.out, '}')
	return nil
}

// keyEnd answers where the colon of "key: ..." or "key:" is in a line's
// text, or -1 when the line is not a key the subset reads: a plain key
// (a letter or underscore, then letters, digits, '-', '_', '.' and '/'), or
// a quoted one.
func keyEnd(txt []byte) int {
	i := 0
	switch c := txt[0]; {
	case c == '\'' || c == '"':
		j := bytes.IndexByte(txt[1:], c)
		if j < 0 {
			return -1
		}
		i = j + 2
		if c == '\'' && i < len(txt) && txt[i] == '\'' {
			return -1 // an escaped quote: the reference reads it
		}
	case isLetter(c) || c == '_':
		for i < len(txt) && isKeyByte(txt[i]) {
			i++
		}
	default:
		return -1
	}
	if i <= maxKey && i < len(txt) && txt[i] == ':' && (i+1 == len(txt) || txt[i+1] == ' ') {
		return i
	}
	return -1
}

// parseKey reads the key text up to its colon.
func parseKey(k []byte) ([]byte, bool) {
	if k[0] == '\'' || k[0] == '"' {
		body := k[1 : len(k)-1]
		return body, !bytes.ContainsRune(body, '\\') || k[0] == '\''
	}
	// A plain key YAML 1.1 resolves to a bool or null, or the merge key.
	return k, !special(k)
}

// special reports whether a plain word resolves to something other than
// itself in yaml.v2 (booleans in their many spellings, null).
func special(w []byte) bool {
	if len(w) > 5 {
		return false
	}
	var low [5]byte
	for i, c := range w {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	switch string(low[:len(w)]) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		return true
	}
	return false
}

// scalar writes the value that fills the rest of a line.
func (p *parser) scalar(v []byte, depth int) error {
	switch c := v[0]; {
	case c == '\'' || c == '"':
		body, rest, ok := quoted(v)
		if !ok {
			return ErrUnsupported
		}
		if rest, ok := afterComment(rest); !ok || len(rest) != 0 {
			return ErrUnsupported
		}
		p.out = appendString(p.out, body)
		return nil
	case c == '>' || c == '|':
		return p.block(v)
	case c == '{' || c == '[':
		rest, err := p.flow(v, depth)
		if err != nil {
			return err
		}
		if rest, ok := afterComment(rest); !ok || len(rest) != 0 {
			return ErrUnsupported
		}
		return nil
	}
	// A plain scalar: it ends at " #".
	if i := bytes.Index(v, []byte(" #")); i >= 0 {
		v = bytes.TrimRight(v[:i], " ")
	}
	if bytes.ContainsAny(v, "[]{}") || bytes.Contains(v, []byte(": ")) || v[len(v)-1] == ':' {
		return ErrUnsupported
	}
	return p.plain(v)
}

// block writes a literal (|, |-) or folded (>, >-) scalar whose lines all
// sit at one indent, deeper than the current line, with no blank line
// among them and no trailing space; anything else (keep chomping, an
// indentation indicator, more-indented lines) goes to the reference. It
// leaves the parser after the scalar's lines, so that the caller's next
// reads on from there.
func (p *parser) block(header []byte) error {
	switch string(header) {
	case ">", ">-", "|", "|-":
	default:
		return ErrUnsupported
	}
	var text []byte
	ind, pos, lines, blank, broken := -1, p.pos, 0, false, false
	for pos < len(p.src) {
		line, next := p.src[pos:], len(p.src)
		if end := bytes.IndexByte(line, '\n'); end >= 0 {
			line, next = line[:end], pos+end+1
		}
		k := 0
		for k < len(line) && line[k] == ' ' {
			k++
		}
		if k == len(line) {
			if ind < 0 || k > ind {
				return ErrUnsupported // a leading blank line, or spaces that are content
			}
			blank = true
			pos = next
			continue
		}
		if ind < 0 {
			if k <= p.ind {
				break
			}
			ind = k
		}
		if k < ind {
			break
		}
		if k > ind || blank || line[len(line)-1] == ' ' {
			return ErrUnsupported
		}
		if lines > 0 {
			if header[0] == '>' {
				text = append(text, ' ')
			} else {
				text = append(text, '\n')
			}
		}
		text = append(text, line[ind:]...)
		lines++
		broken = next > pos+len(line)
		pos = next
	}
	if lines == 0 {
		return ErrUnsupported
	}
	if len(header) == 1 {
		if !broken {
			return ErrUnsupported // clipped without a final line break
		}
		text = append(text, '\n')
	}
	p.out = appendString(p.out, text)
	p.pos = pos
	return nil
}

// plain writes a plain scalar as yaml.v2 resolves it: a decimal integer,
// true, false, null, or a string that cannot be read as anything else.
func (p *parser) plain(v []byte) error {
	switch c := v[0]; {
	case c == '-' || isDigit(c):
		if isInteger(v) {
			p.out = append(p.out, v...)
			return nil
		}
		if !isSuffixed(v) {
			return ErrUnsupported
		}
	case isLetter(c) || c == '_' || c == '/' || c >= utf8.RuneSelf:
		if special(v) {
			switch string(v) {
			case "true", "false", "null":
				p.out = append(p.out, v...)
				return nil
			}
			return ErrUnsupported
		}
	default:
		return ErrUnsupported // an indicator, '.', '+', '~' and the like
	}
	p.out = appendString(p.out, v)
	return nil
}

// flow writes a flow collection that closes on its line ({a: 1, b: [x]})
// and answers what follows it. Keys are read as in a block mapping; every
// entry must hold a value (no "[a, , b]", no trailing comma).
func (p *parser) flow(v []byte, depth int) ([]byte, error) {
	if depth >= MaxDepth {
		return nil, ErrUnsupported
	}
	open := v[0]
	closing := byte(']')
	if open == '{' {
		closing = '}'
	}
	p.out = append(p.out, open)
	v = bytes.TrimLeft(v[1:], " ")
	if len(v) > 0 && v[0] == closing {
		p.out = append(p.out, closing)
		return v[1:], nil
	}
	keys := p.keySet()
	defer keys.done()
	for n := 0; ; n++ {
		if n > 0 {
			p.out = append(p.out, ',')
		}
		if len(v) == 0 {
			return nil, ErrUnsupported
		}
		if open == '{' {
			end := flowKeyEnd(v)
			if end < 0 {
				return nil, ErrUnsupported
			}
			key, ok := parseKey(v[:end])
			if !ok || !keys.add(key) {
				return nil, ErrUnsupported
			}
			p.out = appendString(p.out, key)
			p.out = append(p.out, ':')
			v = bytes.TrimLeft(v[end+1:], " ")
			if len(v) == 0 || v[0] == ',' || v[0] == '}' {
				return nil, ErrUnsupported // an empty value
			}
		}
		var err error
		if v, err = p.flowValue(v, depth); err != nil {
			return nil, err
		}
		v = bytes.TrimLeft(v, " ")
		if len(v) == 0 {
			return nil, ErrUnsupported // closes on a later line
		}
		switch v[0] {
		case closing:
			p.out = append(p.out, closing)
			return v[1:], nil
		case ',':
			v = bytes.TrimLeft(v[1:], " ")
			if len(v) == 0 || v[0] == ',' || v[0] == closing {
				return nil, ErrUnsupported
			}
		default:
			return nil, ErrUnsupported
		}
	}
}

// flowValue writes one value inside a flow collection and answers the rest.
func (p *parser) flowValue(v []byte, depth int) ([]byte, error) {
	switch v[0] {
	case '{', '[':
		return p.flow(v, depth+1)
	case '\'', '"':
		body, rest, ok := quoted(v)
		if !ok {
			return nil, ErrUnsupported
		}
		p.out = appendString(p.out, body)
		return rest, nil
	}
	i := bytes.IndexAny(v, ",[]{}#:")
	if i < 0 {
		return nil, ErrUnsupported // closes on a later line
	}
	switch v[i] {
	case '#', ':', '[', '{':
		return nil, ErrUnsupported // a comment, a pair, or a stray indicator
	}
	w := bytes.TrimRight(v[:i], " ")
	if len(w) == 0 {
		return nil, ErrUnsupported
	}
	for _, c := range w {
		if !isKeyByte(c) && c != ' ' {
			return nil, ErrUnsupported // yaml.v2 ends a flow scalar at '?' and more
		}
	}
	if err := p.plain(w); err != nil {
		return nil, err
	}
	return v[i:], nil
}

// flowKeyEnd is keyEnd inside a flow mapping, where the colon must be
// followed by a space (yaml.v2 reads "{a:, b: 1}" as a key "a:").
func flowKeyEnd(v []byte) int {
	i := 0
	switch c := v[0]; {
	case c == '\'' || c == '"':
		j := bytes.IndexByte(v[1:], c)
		if j < 0 {
			return -1
		}
		i = j + 2
		if c == '\'' && i < len(v) && v[i] == '\'' {
			return -1
		}
	case isLetter(c) || c == '_':
		for i < len(v) && isKeyByte(v[i]) {
			i++
		}
	default:
		return -1
	}
	if i <= maxKey && i+1 < len(v) && v[i] == ':' && v[i+1] == ' ' {
		return i
	}
	return -1
}

// quoted reads a quoted scalar that closes on its line: its text and what
// follows it. A double-quoted one with an escape goes to the reference.
func quoted(v []byte) (body, rest []byte, ok bool) {
	q := v[0]
	if j := bytes.IndexByte(v[1:], q); j >= 0 && (q == '"' || j+2 >= len(v) || v[j+2] != '\'') {
		body, rest = v[1:1+j], v[j+2:] // the common case: no '' inside
		if q == '"' && bytes.IndexByte(body, '\\') >= 0 {
			return nil, nil, false
		}
		return body, rest, true
	}
	i := 1
	for {
		j := bytes.IndexByte(v[i:], q)
		if j < 0 {
			return nil, nil, false // closes on a later line
		}
		if q == '\'' && i+j+1 < len(v) && v[i+j+1] == '\'' {
			body = append(body, v[i:i+j+1]...) // '' is one quote
			i += j + 2
			continue
		}
		body = append(body, v[i:i+j]...)
		i += j + 1
		break
	}
	if q == '"' && bytes.IndexByte(body, '\\') >= 0 {
		return nil, nil, false
	}
	if body == nil {
		body = []byte{}
	}
	return body, v[i:], true
}

// afterComment cuts a trailing comment: what follows a value must be
// nothing, or spaces and a comment.
func afterComment(rest []byte) ([]byte, bool) {
	if len(rest) == 0 {
		return rest, true
	}
	if rest[0] != ' ' {
		return rest, false
	}
	t := bytes.TrimLeft(rest, " ")
	if len(t) == 0 || t[0] == '#' {
		return nil, true
	}
	return t, true
}

// isInteger: a decimal int64 yaml.v2 writes as the same digits (no sign
// but '-', no leading zero, no '_', at most 18 digits).
func isInteger(v []byte) bool {
	d := v
	if d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 || (d[0] == '0' && (len(d) > 1 || len(v) != len(d))) {
		return false
	}
	for _, c := range d {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// isSuffixed: digits, an optional fraction, then a letter that cannot start
// an exponent or a base prefix, then letters, digits and dots ("6Gi",
// "500m", "4m59s"): yaml.v2 resolves none of these to a number or a
// timestamp (which needs a '-').
func isSuffixed(v []byte) bool {
	i := 0
	for i < len(v) && isDigit(v[i]) {
		i++
	}
	if i == 0 {
		return false
	}
	if i < len(v) && v[i] == '.' {
		i++
		j := i
		for i < len(v) && isDigit(v[i]) {
			i++
		}
		if i == j {
			return false
		}
	}
	if i == len(v) {
		return false // a plain number
	}
	switch v[i] {
	case 'e', 'E', 'x', 'X', 'o', 'O', 'b', 'B':
		return false
	}
	for ; i < len(v); i++ {
		if !isLetter(v[i]) && !isDigit(v[i]) && v[i] != '.' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isKeyByte(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '-' || c == '_' || c == '.' || c == '/'
}

// appendString writes s as a JSON string. clean has already refused every
// control character but the newline (which only a block scalar holds), so
// only the quote, the backslash and the newline need escapes.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i, c := range s {
		switch c {
		case '"', '\\':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', c)
			start = i + 1
		case '\n':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'n')
			start = i + 1
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// keySet refuses a duplicate key. Its keys live on the parser's stack
// (one mapping's after its parent's), searched linearly while the mapping
// is small; a mapping of many keys gets a map, so that a hostile one stays
// linear in time.
type keySet struct {
	p     *parser
	start int
	set   map[string]struct{}
}

func (p *parser) keySet() keySet { return keySet{p: p, start: len(p.keys)} }

// done pops the mapping's keys.
func (k *keySet) done() { k.p.keys = k.p.keys[:k.start] }

func (k *keySet) add(key []byte) bool {
	if k.set != nil {
		if _, dup := k.set[string(key)]; dup {
			return false
		}
		k.set[string(key)] = struct{}{}
		return true
	}
	mine := k.p.keys[k.start:]
	for _, have := range mine {
		if bytes.Equal(have, key) {
			return false
		}
	}
	k.p.keys = append(k.p.keys, key)
	if len(mine) >= 16 {
		k.set = make(map[string]struct{}, 64)
		for _, have := range k.p.keys[k.start:] {
			k.set[string(have)] = struct{}{}
		}
	}
	return true
}
