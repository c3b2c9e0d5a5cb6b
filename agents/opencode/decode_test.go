package opencode

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
var fixedNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// goldenEvent is an event as the golden files show it (no time stamp).
type goldenEvent struct {
	Line       int              `json:"line"`
	Type       string           `json:"type,omitempty"`
	Kind       loop.EventKind   `json:"kind,omitempty"`
	Subtype    string           `json:"subtype,omitempty"`
	SessionID  string           `json:"session_id,omitempty"`
	Text       string           `json:"text,omitempty"`
	Tool       string           `json:"tool,omitempty"`
	Input      string           `json:"input,omitempty"`
	IsError    bool             `json:"is_error,omitempty"`
	UsageLimit *loop.UsageLimit `json:"usage_limit,omitempty"`
	Result     *loop.RunResult  `json:"result,omitempty"`
	Err        string           `json:"err,omitempty"`
}

// golden is a golden file: the events of a stream and the classification
// of the whole session, as if OpenCode exited with the code its stream
// implies (1 after an error line, else 0).
type golden struct {
	Events []goldenEvent  `json:"events"`
	Result loop.RunResult `json:"result"`
}

// decodeAll decodes a whole stream into golden events (lines without
// events appear once, with their type) and the session they make.
func decodeAll(t *testing.T, r io.Reader) ([]goldenEvent, *Session) {
	t.Helper()
	dec := NewDecoder(r)
	dec.Now = func() time.Time { return fixedNow }
	var out []goldenEvent
	for n := 1; ; n++ {
		line, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			return out, dec.Session()
		}
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if len(line.Events) == 0 {
			out = append(out, goldenEvent{Line: n, Type: line.Type})
		}
		for _, ev := range line.Events {
			if !ev.At.Equal(fixedNow) {
				t.Errorf("line %d: event time %v, want the decoder's clock", n, ev.At)
			}
			g := goldenEvent{Line: n, Type: line.Type, Kind: ev.Kind, Subtype: ev.Subtype, SessionID: ev.SessionID,
				Text: ev.Text, Tool: ev.Tool, Input: ev.Input, IsError: ev.IsError, UsageLimit: ev.UsageLimit, Result: ev.Result}
			if ev.Err != nil {
				g.Err = ev.Err.Error()
			}
			out = append(out, g)
		}
	}
}

// TestDecodeFixtures decodes every stream in testdata and compares its
// events and classification with testdata/golden/<name>.golden.
func TestDecodeFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	more, _ := filepath.Glob("testdata/*.ndjson")
	files = append(files, more...)
	if len(files) < 7 {
		t.Fatalf("found %d streams in testdata, want at least 7", len(files))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			events, sess := decodeAll(t, bytes.NewReader(data))
			exit := 0
			if len(sess.Errors) > 0 {
				exit = 1
			}
			got := golden{Events: events, Result: Classify(sess, agentproc.Ending{ExitCode: exit, Model: "anthropic/claude-sonnet-4-5", Now: fixedNow})}
			b, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, '\n')
			agentproctest.Golden(t, filepath.Join("testdata", "golden", name+".golden"), b, *update)
		})
	}
}

// TestDecodeToolRun checks the real capture's mapping field by field, so
// that a golden file rewritten by mistake does not hide a regression.
func TestDecodeToolRun(t *testing.T) {
	f, err := os.Open("testdata/checked-1.18.33-tool-run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, sess := decodeAll(t, f)
	var kinds []loop.EventKind
	for _, ev := range events {
		kinds = append(kinds, ev.Kind)
	}
	want := []loop.EventKind{loop.EventInit, loop.EventToolUse, loop.EventToolResult, "", "", loop.EventText, loop.EventResult}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("event kinds (-want +got):\n%s", diff)
	}
	if events[1].Tool != "bash" || events[1].Input != "echo hi > out.txt" || events[2].Text != "(no output)" {
		t.Errorf("tool events %+v %+v", events[1], events[2])
	}
	wantSess := &Session{SessionID: "ses_df5d8ebf7ffeMz1F63yhf3ikWd", Steps: 2, Reason: "stop", Stopped: true,
		Usage:     loop.Usage{InputTokens: 1600, OutputTokens: 100, CacheReadTokens: 400},
		FinalText: "Done. <task-done>T1</task-done>", LastText: "Done. <task-done>T1</task-done>"}
	if diff := cmp.Diff(wantSess, sess); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}
}

// TestDecodeHugeLine reads a tool result line of 10 MB: no line limit.
func TestDecodeHugeLine(t *testing.T) {
	big := strings.Repeat("x", 10<<20)
	var b bytes.Buffer
	b.WriteString(`{"type":"tool_use","sessionID":"s","part":{"tool":"read","state":{"status":"completed","input":{"filePath":"big"},"output":"` + big + `"}}}` + "\n")
	b.WriteString(`{"type":"text","sessionID":"s","part":{"text":"after"}}` + "\n")
	events, sess := decodeAll(t, &b)
	if len(events) != 4 || len(events[2].Text) > ToolOutputLimit+len("…") || events[3].Text != "after" || sess.LastText != "after" {
		t.Errorf("got %d events, tool result of %d bytes, last %q", len(events), len(events[2].Text), events[len(events)-1].Text)
	}
}

// FuzzDecode feeds arbitrary streams to the decoder, seeded with the
// fixtures: it must not panic, and every event it emits has a kind.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.*json*")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := NewDecoder(bytes.NewReader(data))
		err := dec.Run(func(ev loop.Event) {
			if ev.Kind == "" {
				t.Errorf("event without a kind: %+v", ev)
			}
		})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		res := Classify(dec.Session(), agentproc.Ending{Now: fixedNow})
		if res.Class == "" {
			t.Errorf("no class")
		}
	})
}
