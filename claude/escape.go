package claude

import (
	"io"
	"sync"
	"unicode/utf8"
)

// Text is data (ARCHITECTURE.md §7): what an agent writes, a task's title, an
// error quoting a file can hold escape sequences that a terminal would
// obey — clear the screen, move the cursor over earlier lines, set the
// window title, write the clipboard (OSC 52). Where text meets a terminal
// its control characters are shown escaped instead; stored data keeps them.

// EscapeControls returns s as a terminal should show it: each control
// character but newline and tab written as an escape a person can read, in
// Go's notation — the C0 controls as \a \b \f \r \v or \x1b-style, DEL and
// the C1 controls (U+0080–U+009F) as \u007f-style — and each byte that is
// not part of valid UTF-8 as \xNN. The rest, backslashes included, is left
// as it is, so escaping is idempotent and printable text is unchanged. A
// DEL or C1 control inside a JSON string becomes the same character in
// JSON's own notation, so JSON output passed through it stays valid and
// means the same; encoding/json already escapes the C0 controls, and
// writes no invalid UTF-8.
//
// It returns s itself, without copying, when there is nothing to escape.
func EscapeControls(s string) string {
	i := firstControl(s)
	if i < 0 {
		return s
	}
	return string(appendEscaped(append(make([]byte, 0, len(s)+16), s[:i]...), s[i:]))
}

// plain marks the bytes shown as they are without a second look: printable
// ASCII, newline and tab. Scanning runs of them through a table is what
// keeps the escaping cheap on large output (`task list --json`).
var plain = func() (t [256]bool) {
	for b := 0x20; b < 0x7f; b++ {
		t[b] = true
	}
	t['\n'], t['\t'] = true, true
	return t
}()

// firstControl returns the offset of the first byte of s that
// EscapeControls escapes, or -1.
func firstControl[T ~string | ~[]byte](s T) int {
	for i := 0; ; {
		for i < len(s) && plain[s[i]] {
			i++
		}
		if i == len(s) {
			return -1
		}
		if s[i] < utf8.RuneSelf {
			return i // C0 or DEL
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && n == 1 || r < 0xA0 {
			return i
		}
		i += n
	}
}

// appendEscaped appends s to dst as EscapeControls shows it.
func appendEscaped[T ~string | ~[]byte](dst []byte, s T) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if plain[b] {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '\a':
				dst = append(dst, `\a`...)
			case '\b':
				dst = append(dst, `\b`...)
			case '\f':
				dst = append(dst, `\f`...)
			case '\r':
				dst = append(dst, `\r`...)
			case '\v':
				dst = append(dst, `\v`...)
			case 0x7f:
				dst = append(dst, `\u007f`...)
			default:
				dst = append(dst, '\\', 'x', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'x', hex[b>>4], hex[b&0xF])
		case r < 0xA0: // C1
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xF])
		default:
			i += n
			continue
		}
		i += n
		start = i
	}
	return append(dst, s[start:]...)
}

// escapeChunk bounds how much of one Write an EscapeWriter escapes at a
// time, and so the buffer it keeps: an agent's answer can be hundreds of
// megabytes in one write.
const escapeChunk = 32 << 10

// EscapeWriter writes what it is given to W as EscapeControls shows it. A
// write that ends inside a UTF-8 sequence (a buffered writer cuts where
// its buffer fills) keeps those bytes back until the next write completes
// them, or until Flush, which writes them escaped. An EscapeWriter is safe
// for concurrent use; each Write reaches W whole or in pieces of its own,
// in order.
type EscapeWriter struct {
	W io.Writer

	mu   sync.Mutex
	tail [utf8.UTFMax]byte // the start of a sequence the last write cut
	nt   int
	buf  []byte
}

// NewEscapeWriter returns an EscapeWriter writing to w.
func NewEscapeWriter(w io.Writer) *EscapeWriter { return &EscapeWriter{W: w} }

// Write escapes p and writes it to W. It returns len(p) unless W failed.
func (e *EscapeWriter) Write(p []byte) (int, error) { return escapeTo(e, p) }

// WriteString is Write without copying s.
func (e *EscapeWriter) WriteString(s string) (int, error) { return escapeTo(e, s) }

func escapeTo[T ~string | ~[]byte](e *EscapeWriter, p T) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(p)
	if e.nt > 0 {
		// Read on from the bytes held back, with the start of p, until
		// past them: they may start a sequence p completes, or be invalid
		// alone and p start a sequence of its own.
		var c [2 * utf8.UTFMax]byte
		k := copy(c[:], e.tail[:e.nt])
		cb := c[:k+copy(c[k:], p)]
		o := 0
		for o < e.nt && utf8.FullRune(cb[o:]) {
			_, size := utf8.DecodeRune(cb[o:])
			o += size
		}
		if o < e.nt {
			// Still cut: all of p is in cb, and cb ends inside a
			// sequence (at most utf8.UTFMax-1 bytes from o).
			err := writeEscaped(e, cb[:o])
			e.nt = copy(e.tail[:], cb[o:])
			if err != nil {
				return 0, err
			}
			return n, nil
		}
		e.nt = 0
		if err := writeEscaped(e, cb[:o]); err != nil {
			return 0, err
		}
		p = p[o-k:]
	}
	// Keep back a sequence cut at the end of p.
	cut := len(p)
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRuneInString(string(p[i:])) {
				cut = i
			}
			break
		}
	}
	if err := writeEscaped(e, p[:cut]); err != nil {
		return 0, err
	}
	e.nt = copy(e.tail[:], p[cut:])
	return n, nil
}

// writeEscaped escapes p, whose end is whole, to e.W, a chunk at a time.
func writeEscaped[T ~string | ~[]byte](e *EscapeWriter, p T) error {
	for len(p) > 0 {
		chunk := p
		if len(chunk) > escapeChunk {
			end := escapeChunk
			for end > escapeChunk-utf8.UTFMax && !utf8.RuneStart(p[end]) {
				end--
			}
			chunk = p[:end]
		}
		p = p[len(chunk):]
		var err error
		if firstControl(chunk) >= 0 {
			e.buf = appendEscaped(e.buf[:0], chunk)
			_, err = e.W.Write(e.buf)
		} else if b, ok := any(chunk).([]byte); ok {
			_, err = e.W.Write(b)
		} else {
			_, err = io.WriteString(e.W, string(chunk))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Flush writes what a cut write left held back (escaped: on its own it is
// not UTF-8).
func (e *EscapeWriter) Flush() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.nt == 0 {
		return nil
	}
	held := e.tail[:e.nt]
	e.nt = 0
	return writeEscaped(e, held)
}
