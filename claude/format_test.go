package claude

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/agentproc/agentproctest"
	"github.com/ralph-dev/ralph/loop"
)

// formatFixture runs a transcript through a Formatter and writes the
// footer of its classification.
func formatFixture(t *testing.T, file string, color bool) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	fm := NewFormatter(&buf)
	fm.Color = color
	dec := NewDecoder(f)
	var sess Session
	for {
		line, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range line.Events {
			sess.Add(ev)
			fm.Event(ev)
		}
	}
	res := Classify(&sess, agentproc.Ending{Now: fixedNow})
	res.Duration = 1234 * time.Millisecond
	fm.Footer(res)
	return buf.String()
}

// TestFormatterGolden renders transcripts as the terminal view (plain, as
// when piped) and compares with testdata/golden/<name>.view.
func TestFormatterGolden(t *testing.T) {
	for _, name := range []string{"default_model", "multi_step_failing_cmd", "err_http529", "max_turns1",
		"usage_limit_oauth", "recorded_voxi_cli-2.1.200_write_run"} {
		t.Run(name, func(t *testing.T) {
			got := formatFixture(t, filepath.Join("testdata", name+".ndjson"), false)
			if strings.Contains(got, "\x1b[") {
				t.Errorf("plain output has ANSI escapes:\n%q", got)
			}
			agentproctest.Golden(t, filepath.Join("testdata", "golden", name+".view"), []byte(got), *update)
		})
	}
}

func TestFormatterColor(t *testing.T) {
	got := formatFixture(t, "testdata/multi_step_failing_cmd.ndjson", true)
	for _, want := range []string{ansiRed + "x Bash failed" + ansiReset, ansiCyan + "> Bash" + ansiReset, ansiGreen + "-- "} {
		if !strings.Contains(got, want) {
			t.Errorf("coloured output lacks %q:\n%q", want, got)
		}
	}
}

func TestNewFormatterColorChoice(t *testing.T) {
	// A pipe is not a terminal; a buffer neither.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if NewFormatter(w).Color || NewFormatter(&bytes.Buffer{}).Color {
		t.Error("colour on for a pipe or a buffer")
	}
	// A terminal, when there is one, gets colour unless NO_COLOR is set.
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		t.Logf("no terminal to check colour on: %v", err)
		return
	}
	defer tty.Close()
	t.Setenv("NO_COLOR", "")
	os.Unsetenv("NO_COLOR")
	if !NewFormatter(tty).Color {
		t.Error("colour off on a terminal")
	}
	t.Setenv("NO_COLOR", "1")
	if NewFormatter(tty).Color {
		t.Error("colour on despite NO_COLOR")
	}
}

func TestFormatterEvents(t *testing.T) {
	tests := []struct {
		name string
		ev   loop.Event
		want string
	}{
		{"long command is cut to one line", loop.Event{Kind: loop.EventToolUse, Tool: "Bash", Input: "echo one\necho two"}, "> Bash echo one …\n"},
		{"tool error shows its first lines", loop.Event{Kind: loop.EventToolResult, Tool: "Bash", IsError: true, Text: "1\n2\n3\n4\n5\n6\n7"},
			"x Bash failed\n  1\n  2\n  3\n  4\n  5\n  … (2 more lines)\n"},
		{"tool success is quiet", loop.Event{Kind: loop.EventToolResult, Tool: "Bash", Text: "lots of output"}, ""},
		{"rejected usage limit", loop.Event{Kind: loop.EventRateLimit, Subtype: "rejected", Text: "rejected five_hour"}, "! usage limit: rejected five_hour\n"},
		{"allowed rate limit is quiet", loop.Event{Kind: loop.EventRateLimit, Subtype: "allowed", Text: "allowed"}, ""},
		{"status is quiet", loop.Event{Kind: loop.EventSystem, Subtype: "status", Text: "requesting"}, ""},
		{"malformed line", loop.Event{Kind: loop.EventMalformed, Text: "garbage"}, "! malformed stream line: garbage\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			NewFormatter(&buf).Event(tt.ev)
			if diff := cmp.Diff(tt.want, buf.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestFormatterEscapes: what the agent writes reaches the view as text —
// a screen clear, an OSC 52 clipboard write, a C1 CSI — in every kind of
// event, huge texts included; with colour on, the only escape sequences
// are the view's own colours.
func TestFormatterEscapes(t *testing.T) {
	const attack = "\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\u009b1;1H\rok"
	const shown = `\x1b[2J\x1b]52;c;cm0gLXJmIH4=\a\u009b1;1H\rok`
	huge := strings.Repeat("padding ", 10_000) + attack
	events := []loop.Event{
		{Kind: loop.EventInit, SessionID: attack, Model: attack},
		{Kind: loop.EventText, Text: attack},
		{Kind: loop.EventText, Text: huge},
		{Kind: loop.EventThinking, Text: attack},
		{Kind: loop.EventToolUse, Tool: attack, Input: attack},
		{Kind: loop.EventToolResult, Tool: attack, IsError: true, Text: attack},
		{Kind: loop.EventSystem, Subtype: "api_retry", Text: attack},
		{Kind: loop.EventRateLimit, Subtype: "rejected", Text: attack},
		{Kind: loop.EventResult, IsError: true, Text: attack + " again"},
		{Kind: loop.EventMalformed, Text: attack},
		{Kind: loop.EventStderr, Text: attack},
	}
	for _, color := range []bool{false, true} {
		var buf bytes.Buffer
		fm := NewFormatter(&buf)
		fm.Color, fm.Thinking = color, true
		for _, ev := range events {
			fm.Event(ev)
		}
		fm.Footer(loop.RunResult{Class: loop.ClassAgentError, IsError: true, Text: attack})
		got := buf.String()
		for _, c := range []string{ansiReset, ansiDim, ansiRed, ansiGreen, ansiYellow, ansiCyan} {
			got = strings.ReplaceAll(got, c, "")
		}
		if i := firstControl(got); i >= 0 {
			t.Fatalf("colour %v: a control character reached the view at %d: %q", color, i, got[max(0, i-40):min(len(got), i+40)])
		}
		if n := strings.Count(got, shown); n < len(events) {
			t.Errorf("colour %v: the attack shown escaped %d times, want at least %d:\n%s", color, n, len(events), got)
		}
	}
}

func ExampleFormatter() {
	fm := NewFormatter(os.Stdout) // plain: os.Stdout is not a terminal here
	fm.Event(loop.Event{Kind: loop.EventText, Text: "I'll run the tests."})
	fm.Event(loop.Event{Kind: loop.EventToolUse, Tool: "Bash", Input: "go test ./..."})
	fm.Event(loop.Event{Kind: loop.EventToolResult, Tool: "Bash", IsError: true, Text: "FAIL\tgithub.com/x/y\t0.01s"})
	fm.Footer(loop.RunResult{Class: loop.ClassSuccess, Duration: 3 * time.Second, Turns: 4, CostUSD: 0.0123,
		Usage: loop.Usage{InputTokens: 5000, OutputTokens: 300, CacheReadTokens: 12000}})
	// Output:
	// I'll run the tests.
	// > Bash go test ./...
	// x Bash failed
	//   FAIL	github.com/x/y	0.01s
	// -- 3s · 4 turns · 5000 in / 300 out tokens (cache 12000 read, 0 write) · $0.0123 · success
}

// A huge answer is written whole, in colour too for thinking, and the view
// keeps no huge text once it is written: only a short one, for comparing
// with an error result, and none after the session's result.
func TestFormatterHugeText(t *testing.T) {
	huge := strings.Repeat("a long answer ", 100_000)
	var buf bytes.Buffer
	fm := NewFormatter(&buf)
	fm.Color, fm.Thinking = true, true
	fm.Event(loop.Event{Kind: loop.EventThinking, Text: huge})
	fm.Event(loop.Event{Kind: loop.EventText, Text: huge})
	if fm.lastText != "" {
		t.Errorf("the view keeps a text of %d bytes", len(fm.lastText))
	}
	want := ansiDim + strings.TrimSpace(huge) + ansiReset + "\n" + strings.TrimSpace(huge) + "\n"
	if got := buf.String(); got != want {
		t.Errorf("wrote %d bytes, want %d: the thinking dimmed, then the answer", len(got), len(want))
	}
	fm.Event(loop.Event{Kind: loop.EventText, Text: "API Error: 500"})
	fm.Event(loop.Event{Kind: loop.EventResult, IsError: true, Text: "API Error: 500"})
	if fm.lastText != "" || strings.Count(buf.String(), "API Error: 500") != 1 {
		t.Errorf("an error result that repeats the last text: written %d times, kept %q", strings.Count(buf.String(), "API Error: 500"), fm.lastText)
	}
}
