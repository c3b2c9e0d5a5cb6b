package gemini

import (
	"bytes"
	"encoding/json"
	"flag"
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
var fixedNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// exitCodes are the exit codes the pinned CLI gave with each capture (the
// third-party recordings: 0).
var exitCodes = map[string]int{
	"checked-0.61.0-http401":                145,
	"checked-0.61.0-http403":                147,
	"checked-0.61.0-http429":                173,
	"checked-0.61.0-http429-daily-quota":    173,
	"checked-0.61.0-http429-retry-3600s":    173,
	"checked-0.61.0-http500":                244,
	"checked-0.61.0-sigterm-during-tool":    0,
	"checked-0.61.0-readonly-shell-refused": 0,
}

// goldenEvent is an event as the golden files show it (no time stamp).
type goldenEvent struct {
	Kind      loop.EventKind  `json:"kind"`
	SessionID string          `json:"session_id,omitempty"`
	Model     string          `json:"model,omitempty"`
	Subtype   string          `json:"subtype,omitempty"`
	Text      string          `json:"text,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Input     string          `json:"input,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Result    *loop.RunResult `json:"result,omitempty"`
	Err       string          `json:"err,omitempty"`
}

func decodeAll(t *testing.T, data []byte) ([]goldenEvent, *Session) {
	t.Helper()
	d := NewDecoder(func() time.Time { return fixedNow })
	var out []goldenEvent
	sess := &Session{}
	err := d.Decode(bytes.NewReader(data), func(ev loop.Event) {
		sess.Add(ev)
		if !ev.At.Equal(fixedNow) {
			t.Errorf("event time %v, want the decoder's clock", ev.At)
		}
		g := goldenEvent{Kind: ev.Kind, SessionID: ev.SessionID, Model: ev.Model, Subtype: ev.Subtype, Text: ev.Text,
			Tool: ev.Tool, Input: ev.Input, IsError: ev.IsError, Result: ev.Result}
		if ev.Err != nil {
			g.Err = ev.Err.Error()
		}
		out = append(out, g)
	})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return out, sess
}

// TestDecodeFixtures decodes every stream in testdata and compares the
// events, and the classification of the session with the exit code the
// CLI gave, with testdata/golden/<name>.golden.
func TestDecodeFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			events, sess := decodeAll(t, data)
			code := exitCodes[name]
			res := Classify(sess, agentproc.Ending{ExitCode: code, Now: fixedNow})
			agentproctest.Golden(t, filepath.Join("testdata", "golden", name+".golden"), agentproctest.DecodeGolden(t, events, "classified (exit "+itoa(code)+")", res), *update)
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestDecodeChunks: the assistant's chunks make one text event, emitted
// when the next line of another kind comes or the stream ends.
func TestDecodeChunks(t *testing.T) {
	in := `{"type":"init","session_id":"s","model":"m"}
{"type":"message","role":"assistant","content":"a","delta":true}
{"type":"message","role":"assistant","content":"b","delta":true}
{"type":"tool_use","tool_name":"glob","tool_id":"1","parameters":{"pattern":"*.go"}}
{"type":"tool_result","tool_id":"1","status":"success","output":"x.go"}
{"type":"message","role":"assistant","content":"c","delta":true}`
	events, sess := decodeAll(t, []byte(in))
	var got []string
	for _, ev := range events {
		got = append(got, string(ev.Kind)+":"+ev.Tool+":"+ev.Text+ev.Input)
	}
	want := []string{"init::", "text::ab", "tool_use:glob:*.go", "tool_result:glob:x.go", "text::c"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if sess.LastText != "c" {
		t.Errorf("LastText %q, want c", sess.LastText)
	}
}

// TestDecodeLongLine: a line far longer than the reader's buffer is one
// event, and the lines around it are unharmed.
func TestDecodeLongLine(t *testing.T) {
	big := strings.Repeat("é", 3<<20)
	in := `{"type":"message","role":"assistant","content":"` + big + `","delta":true}` + "\n" +
		`{"type":"result","status":"success","stats":{"input_tokens":10,"input":10,"output_tokens":2,"total_tokens":12}}` + "\n"
	events, sess := decodeAll(t, []byte(in))
	if len(events) != 2 || events[0].Text != big || events[1].Kind != loop.EventResult {
		t.Fatalf("got %d events", len(events))
	}
	if sess.LastText != big {
		t.Errorf("LastText has %d bytes, want %d", len(sess.LastText), len(big))
	}
}

// TestDecodeKeyArgs: each tool call shows what it does.
func TestDecodeKeyArgs(t *testing.T) {
	long := strings.Repeat("x", 600)
	tests := []struct{ params, want string }{
		{`{"command":"go test ./...","description":"run"}`, "go test ./..."},
		{`{"file_path":"a/b.go","content":"…"}`, "a/b.go"},
		{`{"dir_path":"."}`, "."},
		{`{"pattern":"TODO","path":"src"}`, "TODO"},
		{`{"query":"go generics"}`, "go generics"},
		{`{"title":"t","summary":"s"}`, `{"title":"t","summary":"s"}`},
		{`{"x":"` + long + `"}`, (`{"x":"` + long)[:inputLimit]},
		{``, ""},
	}
	for _, tt := range tests {
		if got := keyArg(json.RawMessage(tt.params)); got != tt.want {
			t.Errorf("keyArg(%.40s) = %.40q, want %.40q", tt.params, got, tt.want)
		}
	}
}

// FuzzDecode: any input decodes without panic, every line gives at most
// what a line can, and the final text is the concatenation of the last
// message's chunks.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"a\"}\n{\"type\":\"result\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		var n int
		err := Decode(bytes.NewReader(data), func(ev loop.Event) {
			n++
			if ev.Kind == loop.EventResult && ev.Result == nil {
				t.Fatal("result event without a result")
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if lines := bytes.Count(data, []byte("\n")) + 1; n > 2*lines {
			t.Fatalf("%d events from %d lines", n, lines)
		}
	})
}
