package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

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
	Subtype    string           `json:"subtype,omitempty"`
	Kind       loop.EventKind   `json:"kind,omitempty"`
	SessionID  string           `json:"session_id,omitempty"`
	Model      string           `json:"model,omitempty"`
	Text       string           `json:"text,omitempty"`
	Tool       string           `json:"tool,omitempty"`
	Input      string           `json:"input,omitempty"`
	IsError    bool             `json:"is_error,omitempty"`
	UsageLimit *loop.UsageLimit `json:"usage_limit,omitempty"`
	Result     *loop.RunResult  `json:"result,omitempty"`
	Err        string           `json:"err,omitempty"`
}

// decodeAll decodes a whole stream into golden events (lines without
// events appear once, with their type) and the session they make.
func decodeAll(t *testing.T, r io.Reader) ([]goldenEvent, *Session) {
	t.Helper()
	dec := NewDecoder(r)
	dec.Now = func() time.Time { return fixedNow }
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
			out = append(out, goldenEvent{Line: n, Type: line.Type, Subtype: line.Subtype})
		}
		for _, ev := range line.Events {
			sess.Add(ev)
			if !ev.At.Equal(fixedNow) {
				t.Errorf("line %d: event time %v, want the decoder's clock", n, ev.At)
			}
			g := goldenEvent{Line: n, Type: line.Type, Subtype: ev.Subtype, Kind: ev.Kind, SessionID: ev.SessionID,
				Model: ev.Model, Text: ev.Text, Tool: ev.Tool, Input: ev.Input, IsError: ev.IsError,
				UsageLimit: ev.UsageLimit, Result: ev.Result}
			if ev.Err != nil {
				g.Err = ev.Err.Error()
			}
			out = append(out, g)
		}
	}
}

// TestDecodeFixtures decodes every transcript in testdata and compares the
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
			res := Classify(sess, agentproc.Ending{ExitCode: 0, Now: fixedNow})

			agentproctest.Golden(t, filepath.Join("testdata", "golden", name+".golden"), agentproctest.DecodeGolden(t, events, "classified (exit 0)", res), *update)
		})
	}
}

func TestDecodeLines(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []goldenEvent
		wantErr bool // want one malformed event
	}{
		{
			name: "key order is free",
			in:   `{"session_id":"s1","result":"done <task-done>a</task-done>","is_error":false,"subtype":"success","num_turns":2,"type":"result","total_cost_usd":0.5}`,
			want: []goldenEvent{{Line: 1, Type: "result", Subtype: "success", Kind: loop.EventResult, SessionID: "s1",
				Text:   "done <task-done>a</task-done>",
				Result: &loop.RunResult{Text: "done <task-done>a</task-done>", SessionID: "s1", Turns: 2, CostUSD: 0.5, Subtype: "success"}}},
		},
		{
			name: "unknown type is kept raw and skipped",
			in:   `{"type":"brand_new","payload":{"x":[1,2,{"y":null}]}}`,
			want: []goldenEvent{{Line: 1, Type: "brand_new"}},
		},
		{
			name: "unknown fields are ignored",
			in:   `{"type":"assistant","future":{"deep":[[["x"]]]},"message":{"new":true,"content":[{"type":"text","text":"hi","extra":1},{"type":"image","source":{}}]}}`,
			want: []goldenEvent{{Line: 1, Type: "assistant", Kind: loop.EventText, Text: "hi"}},
		},
		{
			name: "utilization as integer",
			in:   `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1784399400,"rateLimitType":"five_hour","utilization":91}}`,
			want: []goldenEvent{{Line: 1, Type: "rate_limit_event", Subtype: "allowed_warning", Kind: loop.EventRateLimit,
				Text:       "allowed_warning five_hour 91% used; resets at 2026-07-18T18:30:00Z",
				UsageLimit: &loop.UsageLimit{Type: "five_hour", ResetsAt: time.Unix(1784399400, 0).UTC()}}},
		},
		{
			name: "utilization as float",
			in:   `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","utilization":0.5}}`,
			want: []goldenEvent{{Line: 1, Type: "rate_limit_event", Subtype: "allowed_warning", Kind: loop.EventRateLimit,
				Text: "allowed_warning 50% used", UsageLimit: &loop.UsageLimit{}}},
		},
		{
			name: "escapes and unicode in strings",
			in:   `{"type":"assistant","message":{"content":[{"type":"text","text":"a\"b\\c\n\u00e9\ud83d\ude00 \u2014 ok"}]}}`,
			want: []goldenEvent{{Line: 1, Type: "assistant", Kind: loop.EventText, Text: "a\"b\\c\né😀 — ok"}},
		},
		{
			name: "tool result as a list of text blocks",
			in: `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Grep","input":{"pattern":"fo+","path":"."}}]}}` + "\n" +
				`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}]}}`,
			want: []goldenEvent{
				{Line: 1, Type: "assistant", Kind: loop.EventToolUse, Tool: "Grep", Input: "fo+"},
				{Line: 2, Type: "user", Kind: loop.EventToolResult, Tool: "Grep", Text: "one\ntwo", IsError: true},
			},
		},
		{
			name: "tool without a key argument keeps its JSON input",
			in:   `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"mcp__x__y","input":{"a":1}}]}}`,
			want: []goldenEvent{{Line: 1, Type: "assistant", Kind: loop.EventToolUse, Tool: "mcp__x__y", Input: `{"a":1}`}},
		},
		{
			name: "blank lines and CRLF are skipped",
			in:   "\n   \r\n" + `{"type":"system","subtype":"status","status":"requesting"}` + "\r\n\n",
			want: []goldenEvent{{Line: 1, Type: "system", Subtype: "status", Kind: loop.EventSystem, Text: "requesting"}},
		},
		{
			name: "last line without a newline",
			in:   `{"type":"system","subtype":"compact_boundary"}`,
			want: []goldenEvent{{Line: 1, Type: "system", Subtype: "compact_boundary", Kind: loop.EventSystem, Text: "context compacted"}},
		},
		{
			name: "compact boundary with its metadata",
			in:   `{"type":"system","subtype":"compact_boundary","session_id":"s","compact_metadata":{"trigger":"auto","pre_tokens":155025}}`,
			want: []goldenEvent{{Line: 1, Type: "system", Subtype: "compact_boundary", Kind: loop.EventSystem, SessionID: "s", Text: "context compacted (auto, 155025 tokens before)"}},
		},
		{name: "garbage", in: `not json at all`, wantErr: true},
		{name: "truncated object", in: `{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]`, wantErr: true},
		{name: "unterminated string", in: `{"type":"result","result":"abc`, wantErr: true},
		{name: "trailing garbage", in: `{"type":"result"} x`, wantErr: true},
		{name: "trailing comma", in: `{"type":"result","a":[1,2,]}`, wantErr: true},
		{name: "missing colon", in: `{"type" "result"}`, wantErr: true},
		{name: "bad literal", in: `{"type":"result","is_error":tru}`, wantErr: true},
		{name: "mismatched brackets", in: `{"type":"result","a":[1,2}}`, wantErr: true},
		{name: "an array, not an object", in: `[1,2,3]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := decodeAll(t, strings.NewReader(tt.in))
			if tt.wantErr {
				if len(got) != 1 || got[0].Kind != loop.EventMalformed || got[0].Err == "" {
					t.Fatalf("got %+v, want one malformed event", got)
				}
				if got[0].Text != tt.in {
					t.Errorf("malformed text = %q, want the line %q", got[0].Text, tt.in)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecoderReset: a reset decoder reads the new stream from its start,
// with nothing left of the old one.
func TestDecoderReset(t *testing.T) {
	dec := NewDecoder(strings.NewReader(`{"type":"system","subtype":"init","session_id":"old","model":"m"}` + "\n" + `{"type":"result","partial":`))
	if _, err := dec.Decode(); err != nil {
		t.Fatal(err)
	}
	dec.Reset(strings.NewReader(`{"type":"result","subtype":"success","result":"new"}`))
	line, err := dec.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if len(line.Events) != 1 || line.Events[0].Text != "new" || line.Events[0].SessionID != "" {
		t.Fatalf("after Reset got %+v", line.Events)
	}
	if _, err := dec.Decode(); !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want io.EOF", err)
	}
}

// TestDecodeMalformedThenGood: a bad line is reported and skipped; the
// stream goes on.
func TestDecodeMalformedThenGood(t *testing.T) {
	in := "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\n" + // cut mid-line
		`{"type":"result","subtype":"success","result":"ok"}` + "\n"
	got, sess := decodeAll(t, strings.NewReader(in))
	if len(got) != 2 || got[0].Kind != loop.EventMalformed || got[1].Kind != loop.EventResult {
		t.Fatalf("got %+v, want malformed then result", got)
	}
	if diff := cmp.Diff(1, sess.Malformed); diff != "" {
		t.Errorf("Malformed (-want +got):\n%s", diff)
	}
}

// TestDecodeHugeLine reads a 64 MB line (a tool result) between two small
// ones: no line-length limit, and the tool output is cut to
// ToolOutputLimit in the event. The huge line's Raw is nil (its memory is
// given back once it is decoded); the small ones' are there.
func TestDecodeHugeLine(t *testing.T) {
	const size = 64 << 20
	payload := strings.Repeat("x", size)
	in := `{"type":"system","subtype":"init","session_id":"s","model":"m"}` + "\n" +
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":"` + payload + `"}]}}` + "\n" +
		`{"type":"result","subtype":"success","result":"done"}` + "\n"
	dec := NewDecoder(strings.NewReader(in))
	var kinds []loop.EventKind
	var raws []int
	for {
		line, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, len(line.Raw))
		for _, ev := range line.Events {
			kinds = append(kinds, ev.Kind)
			if ev.Kind == loop.EventToolResult && ev.Text != payload[:ToolOutputLimit] {
				t.Errorf("tool result text is %d bytes, want the first %d of the output", len(ev.Text), ToolOutputLimit)
			}
		}
	}
	if diff := cmp.Diff([]loop.EventKind{loop.EventInit, loop.EventToolResult, loop.EventResult}, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{63, 0, 53}, raws); diff != "" {
		t.Errorf("lengths of Raw (-want +got):\n%s", diff)
	}
}

// bigTexts returns texts big enough to be decoded a piece at a time, raw
// (the inside of a JSON string) and decoded, with every kind of escape
// placed across the first piece's end, and one of 3 MB with escapes all
// over it.
func bigTexts() (raws, decs []string) {
	pieces := []struct{ raw, dec string }{
		{`\n`, "\n"}, {`\"`, `"`}, {`\\`, `\`}, {`\/`, "/"}, {`\u00e9`, "\u00e9"},
		{`\ud83d\ude00`, "\U0001F600"}, {`\ud83d!`, "\uFFFD!"}, {"\u00e9", "\u00e9"}, {"\U0001F600", "\U0001F600"},
	}
	for _, p := range pieces {
		for k := 1; k <= 13; k++ {
			plain := strings.Repeat("a", bigStep-k)
			tail := strings.Repeat("b", 100)
			raws = append(raws, plain+p.raw+tail+p.raw)
			decs = append(decs, plain+p.dec+tail+p.dec)
		}
	}
	var raw, dec strings.Builder
	for i := 0; raw.Len() < 3<<20; i++ {
		p := pieces[i%len(pieces)]
		run := strings.Repeat("z", (i*7919)%5000)
		raw.WriteString(run + p.raw)
		dec.WriteString(run + p.dec)
	}
	return append(raws, raw.String()), append(decs, dec.String())
}

// TestDecodeBigTexts decodes big texts in assistant lines of several
// blocks (over 4 MB: read into memory of the line's own, given back while
// the texts are copied out of it) and gives each last text back in a
// result line, as Claude Code does, followed by fields that must survive;
// once through Decode and once through DecodeLine. Every text must come
// out whole and as encoding/json decodes it, and a result that repeats
// the last text shares its memory.
func TestDecodeBigTexts(t *testing.T) {
	raws, decs := bigTexts()
	var stream bytes.Buffer
	var want []string // the texts of the events, in order
	// Enough blocks for a line longer than 4 MiB (see
	// agentproc.LineReader): read into memory of its own, which is given
	// back as the texts are decoded.
	group := (4<<20)/bigStep + 2
	for i := 0; i < len(raws); i += group {
		end := min(i+group, len(raws))
		stream.WriteString(`{"type":"assistant","message":{"content":[`)
		for j := i; j < end; j++ {
			if j > i {
				stream.WriteString(",")
			}
			stream.WriteString(`{"type":"text","text":"` + raws[j] + `"}`)
			want = append(want, decs[j])
		}
		stream.WriteString(`]},"session_id":"s"}` + "\n")
		// The result repeats the last text; every other result differs
		// from it late in the text, in a byte (same length: compared up
		// to there) or by one more at the end.
		res, resDec := raws[end-1], decs[end-1]
		if (i/group)%2 == 1 {
			if j := strings.LastIndexByte(res, 'b'); j >= 0 {
				k := strings.LastIndexByte(resDec, 'b')
				res, resDec = res[:j]+"c"+res[j+1:], resDec[:k]+"c"+resDec[k+1:]
			} else {
				res, resDec = res+"!", resDec+"!"
			}
		}
		stream.WriteString(`{"type":"result","subtype":"success","result":"` + res + `","session_id":"s9","num_turns":7,"usage":{"output_tokens":5}}` + "\n")
		want = append(want, resDec)
	}
	for i, raw := range raws {
		var dec string
		if err := json.Unmarshal([]byte(`"`+raw+`"`), &dec); err != nil || dec != decs[i] {
			t.Fatalf("text %d: encoding/json decodes it differently (%v)", i, err)
		}
	}
	check := func(t *testing.T, events []loop.Event) {
		t.Helper()
		var got []string
		var last string
		for _, ev := range events {
			got = append(got, ev.Text)
			switch ev.Kind {
			case loop.EventText:
				last = ev.Text
			case loop.EventResult:
				if r := ev.Result; r.SessionID != "s9" || r.Turns != 7 || r.Usage.OutputTokens != 5 {
					t.Errorf("result fields after the big text: %+v", r)
				}
				if shared := unsafe.StringData(ev.Text) == unsafe.StringData(last); shared != (ev.Text == last) {
					t.Errorf("result %d bytes, equal to the last text: %v, sharing its memory: %v", len(ev.Text), ev.Text == last, shared)
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%d events, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				n := 0
				for n < min(len(got[i]), len(want[i])) && got[i][n] == want[i][n] {
					n++
				}
				t.Errorf("event %d: %d bytes, want %d; first difference at byte %d", i, len(got[i]), len(want[i]), n)
			}
		}
	}
	t.Run("Decode", func(t *testing.T) {
		dec := NewDecoder(bytes.NewReader(stream.Bytes()))
		var events []loop.Event
		for {
			line, err := dec.Decode()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, line.Events...)
		}
		check(t, events)
	})
	t.Run("DecodeLine", func(t *testing.T) {
		dec := NewDecoder(nil)
		var events []loop.Event
		for line := range bytes.SplitSeq(bytes.TrimSuffix(stream.Bytes(), []byte("\n")), []byte("\n")) {
			events = append(events, dec.DecodeLine(line).Events...)
		}
		check(t, events)
	})
}

func TestJSONStringMax(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		max  int
		want string
	}{
		{"plain, no limit", `"hello"`, -1, "hello"},
		{"plain, cut", `"hello"`, 3, "hel"},
		{"cut never splits a rune", `"aé"`, 2, "a"},
		{"escaped, cut", `"a\nbcd"`, 3, "a\nb"},
		{"escaped rune not split", `"a\u00e9"`, 2, "a"},
		{"surrogate pair", `"\ud83d\ude00"`, -1, "😀"},
		{"lone surrogate", `"\ud83d!"`, -1, "\uFFFD!"},
		{"not a string", `12`, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, jsonStringMax([]byte(tt.raw), tt.max)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzDecodeLine: the scanner never panics, and agrees with encoding/json
// on what is an object (for inputs encoding/json accepts, ours must too).
func FuzzDecodeLine(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.ndjson")
	for _, file := range files {
		data, _ := os.ReadFile(file)
		for l := range bytes.SplitSeq(data, []byte("\n")) {
			if len(l) < 4096 {
				f.Add(l)
			}
		}
	}
	f.Add([]byte(`{"a":[1,{"b":"c\""}],"type":"x"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		dec := NewDecoder(nil)
		got := dec.DecodeLine(line)
		var obj map[string]any
		if json.Unmarshal(line, &obj) == nil && obj != nil {
			for _, ev := range got.Events {
				if ev.Kind == loop.EventMalformed {
					t.Fatalf("valid object %q reported malformed: %v", line, ev.Err)
				}
			}
		}
	})
}

func ExampleDecoder() {
	stream := `{"type":"system","subtype":"init","session_id":"abc","model":"claude-sonnet-5-5"}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"go test ./..."}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":false}]}}
{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"<task-done>t-1</task-done>"}
`
	dec := NewDecoder(strings.NewReader(stream))
	for {
		line, err := dec.Decode()
		if err != nil {
			break
		}
		for _, ev := range line.Events {
			fmt.Println(strings.TrimSpace(fmt.Sprint(ev.Kind, " ", ev.Tool, " ", ev.Input, " ", ev.Text)))
		}
	}
	// Output:
	// init
	// tool_use Bash go test ./...
	// tool_result Bash  ok
	// result   <task-done>t-1</task-done>
}
