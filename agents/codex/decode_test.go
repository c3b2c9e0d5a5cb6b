package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
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

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fixedNow is the clock of the golden files and classification tests.
var fixedNow = time.Date(2026, 11, 24, 4, 7, 0, 0, time.UTC)

// goldenEvent is an event as the golden files show it (no time stamp).
type goldenEvent struct {
	Line       int              `json:"line"`
	Type       string           `json:"type,omitempty"`
	Subtype    string           `json:"subtype,omitempty"`
	Kind       loop.EventKind   `json:"kind,omitempty"`
	SessionID  string           `json:"session_id,omitempty"`
	Text       string           `json:"text,omitempty"`
	Tool       string           `json:"tool,omitempty"`
	Input      string           `json:"input,omitempty"`
	IsError    bool             `json:"is_error,omitempty"`
	UsageLimit *loop.UsageLimit `json:"usage_limit,omitempty"`
	Result     *loop.RunResult  `json:"result,omitempty"`
	Err        string           `json:"err,omitempty"`
}

func newTestDecoder(r io.Reader) *Decoder {
	d := NewDecoder(r)
	d.Now = func() time.Time { return fixedNow }
	d.Location = time.UTC
	return d
}

// decodeAll decodes a whole stream into golden events (lines without
// events appear once, with their type) and the session they make.
func decodeAll(t *testing.T, r io.Reader) ([]goldenEvent, *Session) {
	t.Helper()
	dec := newTestDecoder(r)
	var out []goldenEvent
	sess := &Session{}
	for n := 1; ; n++ {
		line, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			return out, sess
		}
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if len(line.Events) == 0 {
			out = append(out, goldenEvent{Line: n, Type: line.Type})
		}
		for _, ev := range line.Events {
			sess.Add(ev)
			if !ev.At.Equal(fixedNow) {
				t.Errorf("line %d: event time %v, want the decoder's clock", n, ev.At)
			}
			g := goldenEvent{Line: n, Type: line.Type, Subtype: ev.Subtype, Kind: ev.Kind, SessionID: ev.SessionID,
				Text: ev.Text, Tool: ev.Tool, Input: ev.Input, IsError: ev.IsError, UsageLimit: ev.UsageLimit, Result: ev.Result}
			if ev.Err != nil {
				g.Err = ev.Err.Error()
			}
			out = append(out, g)
		}
	}
}

// TestDecodeFixtures decodes every stream in testdata and compares the
// events, and the classification of the whole session (as if the agent
// exited 0 on its own), with testdata/golden/<name>.golden.
func TestDecodeFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.ndjson")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".ndjson")
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			events, sess := decodeAll(t, f)
			res := Classify(sess, agentproc.Ending{ExitCode: 0})
			Estimate(&res, "gpt-5.5")

			agentproctest.Golden(t, filepath.Join("testdata", "golden", name+".golden"), agentproctest.DecodeGolden(t, events, "classified (exit 0, model gpt-5.5)", res), *update)
		})
	}
}

func TestDecodeLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []goldenEvent
	}{
		{
			name: "unknown type is skipped",
			in:   `{"type":"brand.new","payload":{"x":[1,2,{"y":null}]}}`,
			want: []goldenEvent{{Line: 1, Type: "brand.new"}},
		},
		{
			name: "unknown item type and fields are skipped",
			in:   `{"type":"item.completed","future":1,"item":{"id":"i","type":"hologram","text":"x"}}`,
			want: []goldenEvent{{Line: 1, Type: "item.completed"}},
		},
		{
			name: "a failed command without its start",
			in:   `{"type":"item.completed","item":{"id":"item_3","type":"command_execution","command":"/bin/bash -lc 'go test ./... | grep -v '\\''ok'\\'''","aggregated_output":"FAIL\n","exit_code":1,"status":"failed"}}`,
			want: []goldenEvent{
				{Line: 1, Type: "item.completed", Kind: loop.EventToolUse, Tool: ToolExec, Input: "go test ./... | grep -v 'ok'"},
				{Line: 1, Type: "item.completed", Kind: loop.EventToolResult, Tool: ToolExec, Text: "FAIL\n", IsError: true},
			},
		},
		{
			name: "exit code alone marks an error",
			in: `{"type":"item.started","item":{"id":"a","type":"command_execution","command":"false","status":"in_progress"}}
{"type":"item.completed","item":{"id":"a","type":"command_execution","command":"false","exit_code":2,"status":"completed"}}`,
			want: []goldenEvent{
				{Line: 1, Type: "item.started", Kind: loop.EventToolUse, Tool: ToolExec, Input: "false"},
				{Line: 2, Type: "item.completed", Kind: loop.EventToolResult, Tool: ToolExec, IsError: true},
			},
		},
		{
			name: "file change",
			in:   `{"type":"item.completed","item":{"id":"f","type":"file_change","changes":[{"path":"a.go","kind":"update"},{"path":"b.go","kind":"add"}],"status":"completed"}}`,
			want: []goldenEvent{
				{Line: 1, Type: "item.completed", Kind: loop.EventToolUse, Tool: "apply_patch", Input: "a.go b.go"},
				{Line: 1, Type: "item.completed", Kind: loop.EventToolResult, Tool: "apply_patch", Text: "update a.go\nadd b.go"},
			},
		},
		{
			name: "mcp tool call that failed",
			in: `{"type":"item.started","item":{"id":"m","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"status":"in_progress"}}
{"type":"item.completed","item":{"id":"m","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"error":{"message":"server gone"},"status":"failed"}}`,
			want: []goldenEvent{
				{Line: 1, Type: "item.started", Kind: loop.EventToolUse, Tool: "mcp__docs__search", Input: `{"q":"x"}`},
				{Line: 2, Type: "item.completed", Kind: loop.EventToolResult, Tool: "mcp__docs__search", Text: "server gone", IsError: true},
			},
		},
		{
			name: "web search",
			in:   `{"type":"item.started","item":{"id":"w","type":"web_search","query":"go 1.26 release notes"}}` + "\n" + `{"type":"item.completed","item":{"id":"w","type":"web_search","query":"go 1.26 release notes"}}`,
			want: []goldenEvent{
				{Line: 1, Type: "item.started", Kind: loop.EventToolUse, Tool: "web_search", Input: "go 1.26 release notes"},
				{Line: 2, Type: "item.completed"},
			},
		},
		{
			name: "reconnecting is a retry notice",
			in:   `{"type":"error","message":"Reconnecting... 2/5 (stream disconnected before completion)"}`,
			want: []goldenEvent{{Line: 1, Type: "error", Subtype: SubtypeRetry, Kind: loop.EventSystem, Text: "Reconnecting... 2/5 (stream disconnected before completion)", IsError: true}},
		},
		{
			name: "blank lines and CRLF are skipped",
			in:   "\n  \r\n" + `{"type":"turn.started"}` + "\r\n\n",
			want: []goldenEvent{{Line: 1, Type: "turn.started", Subtype: SubtypeTurnStarted, Kind: loop.EventSystem}},
		},
		{
			name: "not an object",
			in:   `[1,2]`,
			want: []goldenEvent{{Line: 1, Kind: loop.EventMalformed, Text: "[1,2]", Err: "codex: malformed stream line: json: cannot unmarshal array into Go value of type codex.wireLine"}},
		},
		{
			name: "not JSON",
			in:   `Reading additional input from stdin...`,
			want: []goldenEvent{{Line: 1, Kind: loop.EventMalformed, Text: "Reading additional input from stdin...", Err: "codex: malformed stream line: invalid character 'R' looking for beginning of value"}},
		},
		{
			name: "trailing data",
			in:   `{"type":"turn.started"} {"x":1}`,
			want: []goldenEvent{{Line: 1, Kind: loop.EventMalformed, Text: `{"type":"turn.started"} {"x":1}`, Err: "codex: malformed stream line: invalid character '{' after top-level value"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := decodeAll(t, strings.NewReader(tt.in))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeHugeLine: a line far longer than the reader's buffer is read
// whole, and a tool's output is cut to ToolOutputLimit.
func TestDecodeHugeLine(t *testing.T) {
	big := strings.Repeat("é", 3<<20) // 6 MB
	line, _ := json.Marshal(map[string]any{"type": "item.completed", "item": map[string]any{
		"id": "x", "type": "command_execution", "command": "cat big", "aggregated_output": big, "exit_code": 0, "status": "completed"}})
	msg, _ := json.Marshal(map[string]any{"type": "item.completed", "item": map[string]any{"id": "y", "type": "agent_message", "text": big}})
	in := string(line) + "\n" + string(msg) + "\n"
	var evs []loop.Event
	if err := Decode(strings.NewReader(in), func(ev loop.Event) { evs = append(evs, ev) }); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
	if out := evs[1].Text; len(out) > ToolOutputLimit+len("…") || !strings.HasSuffix(out, "…") || !strings.HasPrefix(big, strings.TrimSuffix(out, "…")) {
		t.Errorf("tool output of %d bytes, want the first %d bytes and a mark", len(out), ToolOutputLimit)
	}
	if evs[2].Kind != loop.EventText || evs[2].Text != big {
		t.Errorf("agent message of %d bytes, want all %d", len(evs[2].Text), len(big))
	}
}

func TestShellCommand(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/bin/bash -lc 'echo hi > out.txt'", "echo hi > out.txt"},
		{`/usr/bin/zsh -lc 'echo '\''q'\'''`, "echo 'q'"},
		{"bash -lc ls", "bash -lc ls"},
		{"/bin/bash -lc 'a' 'b'", "/bin/bash -lc 'a' 'b'"},
		{"sleep 3", "sleep 3"},
		{"/bin/bash -lc ''", "/bin/bash -lc ''"},
	}
	for _, tt := range tests {
		if got := ShellCommand(tt.in); got != tt.want {
			t.Errorf("ShellCommand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestUsageLimitOf(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC) // 11:00 in Paris
	tests := []struct {
		name string
		msg  string
		loc  *time.Location
		want *loop.UsageLimit
	}{
		{"later today", "You’ve hit your usage limit. Upgrade to Pro … or try again at 7:07 PM.", time.UTC,
			&loop.UsageLimit{ResetsAt: time.Date(2026, 11, 24, 19, 7, 0, 0, time.UTC)}},
		{"past today is tomorrow", "You've hit your usage limit. To get more access now, send a request to your admin or try again at 12:16 AM.", time.UTC,
			&loop.UsageLimit{ResetsAt: time.Date(2026, 11, 25, 0, 16, 0, 0, time.UTC)}},
		{"in Codex's zone", "You've hit your usage limit. … or try again at 12:16 PM.", paris,
			&loop.UsageLimit{ResetsAt: time.Date(2026, 11, 24, 11, 16, 0, 0, time.UTC)}},
		{"with a date", "You’ve hit your usage limit. … or try again at Nov 26th, 2026 6:07 AM.", time.UTC,
			&loop.UsageLimit{ResetsAt: time.Date(2026, 11, 26, 6, 7, 0, 0, time.UTC)}},
		{"no reset time", "You've hit your usage limit. Visit https://chatgpt.com/settings/usage to purchase more credits", time.UTC,
			&loop.UsageLimit{}},
		{"not a limit", "exceeded retry limit, last status: 429 Too Many Requests", time.UTC, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := UsageLimitOf(tt.msg, now, tt.loc)
			if tt.want != nil {
				tt.want.Message = tt.msg
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzDecode: the decoder never panics, gives at least one event for every
// line that is not a JSON object, and reads every line of a stream.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.ndjson")
	for _, file := range files {
		data, _ := os.ReadFile(file)
		f.Add(data)
		for l := range bytes.SplitSeq(data, []byte("\n")) {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"item.completed","item":{"type":"command_execution","exit_code":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := 0
		for l := range bytes.SplitSeq(data, []byte("\n")) {
			if len(bytes.TrimSpace(bytes.TrimRight(l, "\r"))) > 0 {
				lines++
			}
		}
		dec := newTestDecoder(bytes.NewReader(data))
		n := 0
		for {
			line, err := dec.Decode()
			if err != nil {
				break
			}
			n++
			var obj map[string]any
			if line.Raw != nil && json.Unmarshal(line.Raw, &obj) != nil && len(line.Events) != 1 {
				t.Fatalf("line %d %q is not an object but gave %d events", n, line.Raw, len(line.Events))
			}
		}
		if n != lines {
			t.Fatalf("decoded %d lines, the input has %d", n, lines)
		}
	})
}
