package claude

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small allocation-free JSON scanner for the stream's hot path.
//
// encoding/json validates and walks every byte of a line through its state
// machine, even for fields it then throws away; stream-json lines are mostly
// fields ralph does not need (tool output, init metadata, model usage). This
// scanner skips values structurally — strings with bytes.IndexByte, nested
// containers by bracket matching — and hands back raw slices of the fields
// asked for. It checks structure (brackets, quotes, colons, commas, literal
// and number characters), which is what tells a truncated or garbage line
// from a good one; it does not check UTF-8 or the grammar of numbers, which
// the agent never gets wrong and which would cost a pass over every byte.

var errSyntax = errors.New("invalid JSON")

// skipWS returns the index of the first non-space byte at or after i.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Bytes of a uint64, for scanning strings eight bytes at a time.
const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
	quotes   = '"' * lowBits
	escapes  = '\\' * lowBits
)

// zeroBytes has the high bit set in the first zero byte of x (and maybe in
// later ones); zero when x has none.
func zeroBytes(x uint64) uint64 { return (x - lowBits) &^ x & highBits }

// skipString returns the index just after the string that opens at b[i]
// (which must be '"').
func skipString(b []byte, i int) (int, error) {
	i++
	// Keys and short values end before bytes.IndexByte's setup pays off:
	// look for the closing quote (or a backslash) eight bytes at a time
	// over the first 64 bytes.
	k := i
	for lim := min(len(b)-8, i+64); k <= lim; k += 8 {
		x := binary.LittleEndian.Uint64(b[k:])
		if m := zeroBytes(x^quotes) | zeroBytes(x^escapes); m != 0 {
			j := k + bits.TrailingZeros64(m)/8
			if b[j] == '"' {
				return j + 1, nil
			}
			k = i // a backslash: the careful loop below, from the start
			break
		}
	}
	// From here on, b[i:k] holds neither quotes nor backslashes.
	i = k
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, errSyntax
		}
		end := i + j
		// Count the backslashes before the quote: an odd number escapes it.
		n := 0
		for k := end - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return end + 1, nil
		}
		i = end + 1
	}
}

// skipValue returns the index just after the value that starts at or after
// b[i] (leading space is skipped).
func skipValue(b []byte, i int) (int, error) {
	i = skipWS(b, i)
	if i >= len(b) {
		return 0, errSyntax
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		return skipContainer(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		j := i + 1
		for j < len(b) {
			c := b[j]
			if (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
				j++
				continue
			}
			break
		}
		return j, nil
	default:
		return 0, errSyntax
	}
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, errSyntax
	}
	return i + len(lit), nil
}

// skipContainer skips the object or array that opens at b[i], checking that
// brackets nest, keys are strings followed by colons, and members are
// separated by commas.
func skipContainer(b []byte, i int) (int, error) {
	// A small fixed stack covers every real line; deeper nesting spills
	// onto the heap.
	var stackBuf [32]byte
	stack := stackBuf[:0]
	stack = append(stack, b[i])
	i++
	// expect: 0 = a value or a close, 1 = a comma or a close.
	const (
		wantValue = iota
		wantComma
	)
	state := wantValue
	first := true
	for len(stack) > 0 {
		i = skipWS(b, i)
		if i >= len(b) {
			return 0, errSyntax
		}
		top := stack[len(stack)-1]
		c := b[i]
		if c == '}' || c == ']' {
			if (c == '}') != (top == '{') || (state == wantValue && !first) {
				return 0, errSyntax
			}
			stack = stack[:len(stack)-1]
			i++
			state, first = wantComma, false
			continue
		}
		if state == wantComma {
			if c != ',' {
				return 0, errSyntax
			}
			i++
			state, first = wantValue, false
			continue
		}
		if top == '{' {
			if c != '"' {
				return 0, errSyntax
			}
			var err error
			if i, err = skipString(b, i); err != nil {
				return 0, err
			}
			i = skipWS(b, i)
			if i >= len(b) || b[i] != ':' {
				return 0, errSyntax
			}
			i = skipWS(b, i+1)
			if i >= len(b) {
				return 0, errSyntax
			}
			c = b[i]
		}
		if c == '{' || c == '[' {
			stack = append(stack, c)
			i++
			state, first = wantValue, true
			continue
		}
		var err error
		if c == '"' {
			i, err = skipString(b, i)
		} else {
			i, err = skipValue(b, i)
		}
		if err != nil {
			return 0, err
		}
		state, first = wantComma, false
	}
	return i, nil
}

// walkObject walks the object that starts at or after b[i], calling fn
// with each member's raw key (without quotes) and the index where its value
// starts; fn returns the index just after the value (skipValue, or a parser
// of its own, so that nested values are read in the same pass). It returns
// the index just after the closing brace.
func walkObject(b []byte, i int, fn func(key []byte, i int) (int, error)) (int, error) {
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '{' {
		return 0, errSyntax
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, errSyntax
		}
		kEnd, err := skipString(b, i)
		if err != nil {
			return 0, err
		}
		key := b[i+1 : kEnd-1]
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return 0, errSyntax
		}
		vStart := skipWS(b, i+1)
		if vStart >= len(b) {
			return 0, errSyntax
		}
		vEnd, err := fn(key, vStart)
		if err != nil {
			return 0, err
		}
		i = skipWS(b, vEnd)
		if i >= len(b) {
			return 0, errSyntax
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, errSyntax
		}
	}
}

// walkArray walks the array that starts at or after b[i] as walkObject
// walks an object.
func walkArray(b []byte, i int, fn func(i int) (int, error)) (int, error) {
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '[' {
		return 0, errSyntax
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return 0, errSyntax
		}
		vEnd, err := fn(i)
		if err != nil {
			return 0, err
		}
		i = skipWS(b, vEnd)
		if i >= len(b) {
			return 0, errSyntax
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return 0, errSyntax
		}
	}
}

// eachField calls fn for every member of the object that starts at or after
// obj[0], with the raw key (without quotes) and the raw value, and returns
// the index just after the object's closing brace.
func eachField(obj []byte, fn func(key, val []byte)) (int, error) {
	return walkObject(obj, 0, func(key []byte, i int) (int, error) {
		end, err := skipValue(obj, i)
		if err != nil {
			return 0, err
		}
		fn(key, obj[i:end])
		return end, nil
	})
}

// eachElem calls fn for every element of the array arr.
func eachElem(arr []byte, fn func(val []byte)) error {
	_, err := walkArray(arr, 0, func(i int) (int, error) {
		end, err := skipValue(arr, i)
		if err != nil {
			return 0, err
		}
		fn(arr[i:end])
		return end, nil
	})
	return err
}

// jsonString decodes a raw JSON string value; anything else gives "".
func jsonString(val []byte) string { return jsonStringMax(val, -1) }

// jsonStringMax decodes a raw JSON string value, keeping at most max bytes
// of it (max < 0: all of it); the cut never splits a character.
func jsonStringMax(val []byte, max int) string {
	if len(val) < 2 || val[0] != '"' {
		return ""
	}
	inner := val[1 : len(val)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		if max >= 0 && len(inner) > max {
			j := max
			for j > 0 && !utf8.RuneStart(inner[j]) {
				j--
			}
			inner = inner[:j]
		}
		return string(inner)
	}
	return string(appendUnescaped(nil, inner, max))
}

// appendUnescaped appends the decoded form of the inside of a JSON string
// to dst, stopping once max bytes were written (max < 0: no limit).
func appendUnescaped(dst, s []byte, max int) []byte {
	dst, _ = unescapeStep(dst, s, 0, len(s), max)
	return dst
}

// unescapeStep appends the decoded form of s[i:] (the inside of a JSON
// string) to dst until it reaches stop — a run of plain bytes ends there,
// an escape that starts before it is decoded whole — or has written max
// bytes (max < 0: no limit). It returns dst and where in s it stopped, so
// that a huge string can be decoded a piece at a time.
func unescapeStep(dst, s []byte, i, stop, max int) ([]byte, int) {
	start := len(dst)
	for i < stop {
		if max >= 0 && len(dst)-start >= max {
			break
		}
		c := s[i]
		if c != '\\' {
			j := bytes.IndexByte(s[i:stop], '\\')
			if j < 0 {
				j = stop - i
			}
			if max >= 0 && len(dst)-start+j > max {
				j = max - (len(dst) - start)
				for j > 0 && !utf8.RuneStart(s[i+j]) {
					j--
				}
				dst = append(dst, s[i:i+j]...)
				i += j
				break
			}
			dst = append(dst, s[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(s) {
			i = len(s)
			break
		}
		if s[i+1] == 'u' {
			r, n := decodeU(s[i:])
			if max >= 0 && len(dst)-start+utf8.RuneLen(r) > max {
				break
			}
			dst = utf8.AppendRune(dst, r)
			i += n
			continue
		}
		switch s[i+1] {
		case '"', '\\', '/':
			dst = append(dst, s[i+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		default:
			dst = append(dst, s[i+1])
		}
		i += 2
	}
	return dst, i
}

// unescapedLen is the length of the decoded form of s (the inside of a
// JSON string), as appendUnescaped writes it.
func unescapedLen(s []byte) int {
	n := 0
	for i := 0; i < len(s); {
		j := bytes.IndexByte(s[i:], '\\')
		if j < 0 {
			return n + len(s) - i
		}
		n, i = n+j, i+j
		switch {
		case i+1 >= len(s):
			return n
		case s[i+1] == 'u':
			r, k := decodeU(s[i:])
			n, i = n+utf8.RuneLen(r), i+k
		default:
			n, i = n+1, i+2
		}
	}
	return n
}

// decodeU decodes a \uXXXX escape (and its low surrogate, if any) at the
// start of s, returning the rune and the bytes consumed.
func decodeU(s []byte) (rune, int) {
	r1, ok := hex4(s)
	if !ok {
		return utf8.RuneError, 2
	}
	if utf16.IsSurrogate(r1) {
		if r2, ok := hex4(s[6:]); ok {
			if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
				return r, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r1, 6
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// keyIs reports whether the raw key equals name. Keys of the stream are
// plain ASCII; an escaped key is decoded before comparing.
func keyIs(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key) == name
	}
	return string(appendUnescaped(nil, key, -1)) == name
}

// jsonInt decodes an integer or float value (floats are truncated); null,
// strings and the rest give 0.
func jsonInt(val []byte) int64 {
	if len(val) == 0 || !(val[0] == '-' || (val[0] >= '0' && val[0] <= '9')) {
		return 0
	}
	if n, err := strconv.ParseInt(string(val), 10, 64); err == nil {
		return n
	}
	f, err := strconv.ParseFloat(string(val), 64)
	if err != nil {
		return 0
	}
	return int64(f)
}

// jsonFloat decodes a number value; anything else gives 0.
func jsonFloat(val []byte) float64 {
	if len(val) == 0 || !(val[0] == '-' || (val[0] >= '0' && val[0] <= '9')) {
		return 0
	}
	f, err := strconv.ParseFloat(string(val), 64)
	if err != nil {
		return 0
	}
	return f
}

// jsonBool reports whether val is the literal true.
func jsonBool(val []byte) bool { return string(val) == "true" }
