package dag

import (
	"strconv"
	"unicode/utf8"
)

// parseFast decodes a line of ralph's own JSON Lines format into jt as
// encoding/json (with DisallowUnknownFields) would, for the lines ralph
// writes and most that people write: a flat object with the keys written
// exactly, each at most once, string values (with escapes), an integer or
// null priority, a string or null parent and a list of strings or null for
// blocked_by. For anything else — other spellings of a key, a repeated
// key, other types, invalid UTF-8, an escaped surrogate, a float, trailing
// text, a beads issue — ok is false and parseLine decodes the line with
// encoding/json, whose answer, error included, stands. An import of a
// million lines spent most of its reading in encoding/json.
func parseFast(line []byte) (jt jsonlTask, ok bool) {
	p := fastParser{b: line}
	if !p.byte('{') {
		return jsonlTask{}, false
	}
	var seen uint16
	if p.ws(); p.peek() == '}' {
		p.i++
		return jt, p.end()
	}
	for {
		key, ok := p.rawString()
		if !ok || !p.byte(':') {
			return jsonlTask{}, false
		}
		var bit uint16
		p.ws()
		switch string(key) {
		case "id":
			bit = 1
			jt.ID, ok = p.string()
		case "title":
			bit = 2
			jt.Title, ok = p.string()
		case "description":
			bit = 4
			jt.Description, ok = p.string()
		case "status":
			bit = 8
			jt.Status, ok = p.string()
		case "feature":
			bit = 16
			jt.Feature, ok = p.string()
		case "priority":
			bit = 32
			if p.null() {
				jt.Priority = nil
			} else {
				var n int
				n, ok = p.int()
				jt.Priority = &n
			}
		case "parent":
			bit = 64
			if p.null() {
				jt.Parent = nil
			} else {
				var s string
				s, ok = p.string()
				jt.Parent = &s
			}
		case "blocked_by":
			bit = 128
			jt.BlockedBy, ok = p.strings()
		case "check":
			bit = 256
			jt.Check, ok = p.string()
		case "check_by":
			bit = 512
			jt.CheckBy, ok = p.string()
		default:
			return jsonlTask{}, false
		}
		if !ok || seen&bit != 0 {
			return jsonlTask{}, false
		}
		seen |= bit
		p.ws()
		switch p.peek() {
		case ',':
			p.i++
			p.ws()
		case '}':
			p.i++
			return jt, p.end()
		default:
			return jsonlTask{}, false
		}
	}
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// ws skips JSON whitespace.
func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte skips whitespace and then c, if c is there.
func (p *fastParser) byte(c byte) bool {
	p.ws()
	if p.peek() != c {
		return false
	}
	p.i++
	return true
}

// end reports whether nothing but whitespace follows.
func (p *fastParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

func (p *fastParser) null() bool {
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// int reads an integer written as JSON writes one (no leading zeros, no
// fraction or exponent) that fits an int.
func (p *fastParser) int() (int, bool) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	switch {
	case p.i == digits, p.b[digits] == '0' && p.i-digits > 1:
		return 0, false
	}
	switch p.peek() {
	case '.', 'e', 'E':
		return 0, false
	}
	n, err := strconv.Atoi(string(p.b[start:p.i]))
	return n, err == nil
}

// rawString reads a string without escapes or control characters and
// returns its bytes, valid until the line changes.
func (p *fastParser) rawString() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// string reads a string value, unescaping it.
func (p *fastParser) string() (string, bool) {
	if p.peek() != '"' {
		return "", false
	}
	p.i++
	start := p.i
	ascii := true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return "", false
}

// escaped finishes a string that has escapes, from its first one; start
// is where the string's content began.
func (p *fastParser) escaped(start int) (string, bool) {
	out := append(make([]byte, 0, p.i-start+16), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		switch e := p.b[p.i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if p.i+6 > len(p.b) {
				return "", false
			}
			r, err := strconv.ParseUint(string(p.b[p.i+2:p.i+6]), 16, 32)
			if err != nil || (r >= 0xd800 && r < 0xe000) {
				return "", false // surrogates: encoding/json's rules
			}
			out = utf8.AppendRune(out, rune(r))
			p.i += 4
		default:
			return "", false
		}
		p.i += 2
	}
	return "", false
}

// strings reads null or a list of strings; [] is an empty, non-nil list.
func (p *fastParser) strings() ([]string, bool) {
	if p.null() {
		return nil, true
	}
	if p.peek() != '[' {
		return nil, false
	}
	p.i++
	out := []string{}
	if p.ws(); p.peek() == ']' {
		p.i++
		return out, true
	}
	for {
		p.ws()
		s, ok := p.string()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		p.ws()
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return out, true
		default:
			return nil, false
		}
	}
}
