package claude

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// ANSI styles of the terminal view.
const (
	ansiReset  = "\x1b[0m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

// How much of long things the terminal view shows.
const (
	errorLines = 5   // first lines of a failed tool's output
	argWidth   = 160 // a tool call's key argument, in bytes
	errorWidth = 500 // the first line of an agent's error, in bytes
)

// Formatter writes a session's events as a terminal view: assistant text,
// tool calls with their key argument, failed tools' first lines, API
// retries and rate-limit warnings, and a footer per run. Colour is used only
// when Color is set; NewFormatter sets it for terminals without NO_COLOR.
// Everything an event carries is shown with its control characters
// escaped (EscapeControls): the agent's words reach the terminal as text,
// never as escape sequences it would obey; the only sequences written are
// the Formatter's own colours.
// A Formatter is safe for concurrent use; its Event method can be a
// RunRequest's OnEvent.
type Formatter struct {
	// Color turns ANSI colours on.
	Color bool
	// Thinking shows the agent's reasoning (dimmed) when set.
	Thinking bool

	mu       sync.Mutex
	w        io.Writer
	lastText string // the session's last short assistant text, not to repeat it as an error
}

// lastTextLimit is the longest assistant text the view remembers to
// compare with an error result (API errors are short); a longer one is
// not kept, so that a huge answer is not kept alive after its session.
const lastTextLimit = 4 << 10

// NewFormatter returns a Formatter writing to w, with colour when w is a
// terminal and NO_COLOR is not set.
func NewFormatter(w io.Writer) *Formatter {
	return &Formatter{w: w, Color: IsTerminal(w) && os.Getenv("NO_COLOR") == ""}
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// style escapes s (see EscapeControls) and colours it with code.
func (f *Formatter) style(code, s string) string {
	s = EscapeControls(s)
	if !f.Color || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (f *Formatter) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(f.w, format, args...)
}

// text writes s, which may be huge (an agent's answer), styled with code
// ("" for none) and followed by a newline, without copying it: fmt would
// build the whole line in a buffer of its own first, and EscapeControls a
// copy; an EscapeWriter escapes it a chunk at a time.
func (f *Formatter) text(code, s string) {
	if len(s) < 64<<10 {
		f.printf("%s\n", f.style(code, s)) // one write
		return
	}
	if !f.Color {
		code = ""
	}
	_, _ = io.WriteString(f.w, code)
	esc := NewEscapeWriter(f.w)
	_, _ = io.WriteString(esc, s)
	_ = esc.Flush()
	if code != "" {
		_, _ = io.WriteString(f.w, ansiReset)
	}
	_, _ = io.WriteString(f.w, "\n")
}

// Event writes one event.
func (f *Formatter) Event(ev loop.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch ev.Kind {
	case loop.EventInit:
		f.printf("%s\n", f.style(ansiDim, "session "+ev.SessionID+" · model "+ev.Model))
	case loop.EventText:
		if text := strings.TrimRight(ev.Text, "\n "); text != "" {
			f.text("", text)
			f.lastText = ""
			if len(ev.Text) <= lastTextLimit {
				f.lastText = ev.Text
			}
		}
	case loop.EventThinking:
		if f.Thinking && strings.TrimSpace(ev.Text) != "" {
			f.text(ansiDim, strings.TrimSpace(ev.Text))
		}
	case loop.EventToolUse:
		f.printf("%s %s\n", f.style(ansiCyan, "> "+ev.Tool), EscapeControls(shorten(ev.Input, argWidth)))
	case loop.EventToolResult:
		if !ev.IsError {
			return
		}
		name := ev.Tool
		if name == "" {
			name = "tool"
		}
		f.printf("%s\n", f.style(ansiRed, "x "+name+" failed"))
		for _, l := range headLines(ev.Text, errorLines) {
			f.printf("  %s\n", f.style(ansiRed, l))
		}
	case loop.EventSystem:
		switch ev.Subtype {
		case "api_retry":
			f.printf("%s\n", f.style(ansiYellow, "! "+ev.Text))
		case "compact_boundary":
			f.printf("%s\n", f.style(ansiDim, "("+ev.Text+")"))
		}
	case loop.EventRateLimit:
		switch ev.Subtype {
		case "rejected":
			f.printf("%s\n", f.style(ansiRed, "! usage limit: "+ev.Text))
		case "allowed_warning":
			f.printf("%s\n", f.style(ansiYellow, "! usage limit near: "+ev.Text))
		}
	case loop.EventResult:
		// An API error comes as a synthetic assistant text and again as the
		// result: once is enough.
		if ev.IsError && ev.Text != "" && ev.Text != f.lastText {
			f.printf("%s\n", f.style(ansiRed, "x agent error: "+shorten(firstLine(ev.Text), errorWidth)))
		}
		f.lastText = "" // the session is over
	case loop.EventMalformed:
		f.printf("%s\n", f.style(ansiYellow, "! malformed stream line: "+shorten(ev.Text, 80)))
	case loop.EventStderr:
		// The agent's own colours, which it thought went to a terminal,
		// are dropped; what is left is shown with its controls escaped.
		f.printf("%s\n", f.style(ansiDim, "stderr: "+loop.Plain(ev.Text)))
	}
}

// Footer writes the per-run footer: duration, turns, tokens, cost and how
// the run ended.
func (f *Formatter) Footer(res loop.RunResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := res.Usage
	turns := "turns"
	if res.Turns == 1 {
		turns = "turn"
	}
	line := fmt.Sprintf("-- %s · %d %s · %d in / %d out tokens (cache %d read, %d write) · $%.4f · %s",
		res.Duration.Round(100*time.Millisecond), res.Turns, turns, u.InputTokens, u.OutputTokens,
		u.CacheReadTokens, u.CacheWriteTokens, res.CostUSD, shorten(Describe(res), argWidth))
	code := ansiGreen
	if !res.OK() {
		code = ansiRed
	}
	f.printf("%s\n", f.style(code, line))
}

// shorten returns the first line of s, cut to n bytes (on a rune boundary)
// with an ellipsis when anything was left out.
func shorten(s string, n int) string {
	s = strings.TrimSpace(s)
	cut := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, cut = s[:i], true
	}
	if len(s) > n {
		for n > 0 && !isRuneStart(s[n]) {
			n--
		}
		s, cut = s[:n], true
	}
	if cut {
		s += " …"
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// headLines returns the first n non-empty lines of s, and a note of how
// many more there were.
func headLines(s string, n int) []string {
	var out []string
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		if i == n {
			out = append(out, fmt.Sprintf("… (%d more lines)", len(lines)-n))
			break
		}
		out = append(out, shorten(l, argWidth))
	}
	return out
}
