package loop

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Describe is the one-line account of a session that went wrong: its
// class, then what happened and the agent's words — for a crash, the last
// line it wrote on standard error — folded to one line and cut to its
// last 200 bytes, where agents put their conclusion. A refusal
// (ClassRefused) is the runner's own account, whole: it says what to
// change. The loop's agent-trouble reasons are Describe's, and a runner's
// tests describe a result with it as the loop would.
func Describe(res RunResult) string {
	if res.Class == ClassRefused && res.Text != "" {
		// The runner's own account, whole: it says what to change.
		return fold(res.Text)
	}
	s := string(res.Class)
	if res.Class == "" {
		s = "unknown"
	}
	detail := res.Text
	switch {
	case res.APIErrorStatus != 0:
		detail = fmt.Sprintf("API error %d %s", res.APIErrorStatus, detail)
	case res.Class == ClassCrashed:
		// Its last text is not an answer (a sigil in it counts for
		// nothing): say what happened, and what it wrote on stderr.
		s += fmt.Sprintf(": the agent printed no result line (exit code %d)", res.ExitCode)
		detail = lastLine(res.Stderr)
	}
	if strings.TrimSpace(detail) == "" {
		detail = res.Stderr
	}
	if d := excerpt(Plain(detail), 200); d != "" {
		s += ": " + d
	}
	return s
}

// excerpt folds text to one line of at most n bytes (keeping the end, where
// agents put their conclusion).
func excerpt(text string, n int) string {
	// Only the end is folded, widened until it gives n bytes: folding a
	// huge text whole would cost a slice of all its words and a copy.
	for w := 2*n + 64; w < len(text); w *= 2 {
		if s := fold(text[runeStart(text, len(text)-w):]); len(s) > n {
			return "…" + s[runeStart(s, len(s)-n):]
		}
	}
	s := fold(text)
	if len(s) > n {
		s = "…" + s[runeStart(s, len(s)-n):]
	}
	return s
}

// fold puts text on one line, its runs of space made single spaces.
func fold(text string) string { return strings.Join(strings.Fields(text), " ") }

// Plain is s without terminal escapes — colours and cursor moves (CSI:
// ESC [ or the one-character C1 CSI U+009B, then parameters and a final
// byte), titles and links (OSC: ESC ] … BEL or ESC \), any other ESC and
// the byte after it — and without other control characters than line
// breaks and tabs (C1 ones included): what an agent CLI that thought it
// wrote to a terminal printed on stderr, as words. Runners and views use
// it on an agent's stderr before they show it.
func Plain(s string) string {
	if !strings.ContainsFunc(s, control) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == 0x1b:
			i = escapeEnd(s, i)
		case c == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f:
			// A C1 control, two bytes in UTF-8; U+009B opens a CSI.
			i++
			if s[i] == 0x9b {
				i = csiEnd(s, i+1)
			}
		case c >= 0x80 || !control(rune(c)):
			// A byte of a multi-byte character, or a printable one.
			b.WriteByte(c)
		}
	}
	return b.String()
}

// control reports whether r is a control character other than a line
// break or a tab: C0, DEL and C1.
func control(r rune) bool {
	return r < ' ' && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f
}

// csiEnd returns the index of the final byte of a CSI whose parameters
// start at s[i].
func csiEnd(s string, i int) int {
	for ; i < len(s) && (s[i] < 0x40 || s[i] > 0x7e); i++ {
	}
	return i
}

// escapeEnd returns the index of the last byte of the escape that starts
// at s[i] (an ESC).
func escapeEnd(s string, i int) int {
	if i+1 >= len(s) {
		return i
	}
	switch s[i+1] {
	case '[': // CSI: parameters, then a final byte in 0x40–0x7e
		return csiEnd(s, i+2)
	case ']': // OSC: up to BEL or ESC \
		for i += 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 1
			}
		}
		return i
	}
	return i + 1
}

// runeStart is the first character boundary of s at or after i.
func runeStart(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// lastLine is the last non-blank line of s.
func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
