package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
)

// ToolOutputLimit is the most bytes of a tool's output kept in an
// EventToolResult's Text: agentproc.ToolOutputLimit.
const ToolOutputLimit = agentproc.ToolOutputLimit

// inputLimit bounds the JSON input of a tool call without a key argument.
const inputLimit = 512

// malformedQuote bounds the quote of a line that is not JSON.
const malformedQuote = 200

// Decoder turns the Gemini CLI's stream-json output (`--output-format
// stream-json`: one JSON object per line) into loop.Events. The zero value
// is ready to use.
type Decoder struct {
	// Now stamps events; nil means time.Now.
	Now func() time.Time

	tools   map[string]string // tool_id -> tool_name
	text    []byte            // assistant chunks of the message in progress
	inText  bool              // a message is in progress
	turns   int               // model turns seen
	inTurn  bool              // the current model turn has shown output
	session string
	model   string
}

// NewDecoder returns a Decoder whose events carry now's times (nil: time.Now).
func NewDecoder(now func() time.Time) *Decoder { return &Decoder{Now: now} }

// Decode decodes a whole stream with a fresh Decoder; it has the signature
// agentproc.Spec.Decode asks for.
func Decode(r io.Reader, emit func(loop.Event)) error { return (&Decoder{}).Decode(r, emit) }

// Decode reads r to its end and calls emit for every event, in order. Lines
// may be of any length. io.EOF and os.ErrClosed (the pipe closed by the
// runner) are not errors.
func (d *Decoder) Decode(r io.Reader, emit func(loop.Event)) error {
	lr := agentproc.NewLineReader(r)
	for {
		line, err := lr.ReadLine()
		if len(line) > 0 {
			d.Line(line, emit)
		}
		if lr.Huge() {
			lr.Release() // give a huge line's memory back at once
		}
		if err != nil {
			d.Flush(emit)
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
	}
}

func (d *Decoder) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// line is one stream-json line; only the fields ralph reads.
type line struct {
	Type       string          `json:"type"`
	SessionID  string          `json:"session_id"`
	Model      string          `json:"model"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Severity   string          `json:"severity"`
	Message    string          `json:"message"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *Stats `json:"stats"`
}

// Stats is a result line's stats: token counts summed over the session's
// model calls (routing calls included), and per model.
type Stats struct {
	TotalTokens  int64  `json:"total_tokens"`
	InputTokens  int64  `json:"input_tokens"` // prompt tokens, cached ones included
	OutputTokens int64  `json:"output_tokens"`
	Cached       int64  `json:"cached"`
	Input        *int64 `json:"input"` // prompt tokens not read from a cache; absent in older releases
	DurationMS   int64  `json:"duration_ms"`
	ToolCalls    int    `json:"tool_calls"`
	// Models are keyed by the model the API reported.
	Models map[string]ModelStats `json:"models"`
}

// ModelStats are one model's token counts.
type ModelStats struct {
	TotalTokens  int64  `json:"total_tokens"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Cached       int64  `json:"cached"`
	Input        *int64 `json:"input"` // absent in older releases
}

// Usage maps the CLI's counts to loop.Usage: InputTokens are the prompt
// tokens not read from a cache ("input", else input_tokens - cached),
// CacheReadTokens "cached", OutputTokens the candidates ("output_tokens")
// plus what total_tokens holds beyond prompt and candidates — the
// reasoning ("thoughts") tokens, billed as output. The CLI reports no
// cache writes (the API's implicit caching charges none).
func (m ModelStats) Usage() loop.Usage {
	in := m.InputTokens - m.Cached
	if m.Input != nil {
		in = *m.Input
	}
	out := m.OutputTokens
	if extra := m.TotalTokens - m.InputTokens - m.OutputTokens; extra > 0 {
		out += extra
	}
	return loop.Usage{InputTokens: max(in, 0), CacheReadTokens: m.Cached, OutputTokens: out}
}

// Usage is the whole session's usage; see ModelStats.Usage.
func (s *Stats) Usage() loop.Usage {
	return ModelStats{TotalTokens: s.TotalTokens, InputTokens: s.InputTokens, OutputTokens: s.OutputTokens,
		Cached: s.Cached, Input: s.Input}.Usage()
}

// statusRE finds the HTTP status in an API error message that quotes the
// API's JSON body: `[API Error: {"error":{"code":500,…`.
var statusRE = regexp.MustCompile(`"code"\s*:\s*([1-5][0-9][0-9])\b`)

// Line decodes one line (with or without its newline) and emits its events.
// A message in progress (assistant text chunks) is emitted as one
// EventText when a line of another kind comes, or at Flush.
func (d *Decoder) Line(raw []byte, emit func(loop.Event)) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	var l line
	if raw[0] != '{' {
		d.Flush(emit)
		emit(loop.Event{Kind: loop.EventMalformed, At: d.now(), Text: quote(raw), Err: errors.New("gemini: not a JSON object")})
		return
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		d.Flush(emit)
		emit(loop.Event{Kind: loop.EventMalformed, At: d.now(), Text: quote(raw), Err: fmt.Errorf("gemini: %w", err)})
		return
	}
	if l.Type == "message" && l.Role == "assistant" {
		d.turn()
		d.text = append(d.text, l.Content...)
		d.inText = true
		return
	}
	d.Flush(emit)
	at := d.now()
	switch l.Type {
	case "init":
		d.session, d.model = l.SessionID, l.Model
		emit(loop.Event{Kind: loop.EventInit, At: at, SessionID: l.SessionID, Model: l.Model})
	case "message":
		// The user's prompt, echoed: a new model turn follows.
		d.inTurn = false
	case "tool_use":
		d.turn()
		if d.tools == nil {
			d.tools = map[string]string{}
		}
		d.tools[l.ToolID] = l.ToolName
		emit(loop.Event{Kind: loop.EventToolUse, At: at, SessionID: d.session, Tool: l.ToolName, Input: keyArg(l.Parameters)})
	case "tool_result":
		d.inTurn = false
		text := l.Output
		isErr := l.Status == "error"
		if isErr && l.Error != nil && l.Error.Message != "" && text == "" {
			text = l.Error.Message
		}
		emit(loop.Event{Kind: loop.EventToolResult, At: at, SessionID: d.session, Tool: d.tools[l.ToolID],
			Text: cut(text, ToolOutputLimit), IsError: isErr})
	case "error":
		emit(loop.Event{Kind: loop.EventSystem, At: at, SessionID: d.session, Subtype: l.Severity, Text: l.Message})
	case "result":
		res := &loop.RunResult{SessionID: d.session, Subtype: l.Status, IsError: l.Status != "success", Turns: d.turns}
		if l.Error != nil {
			res.Text = l.Error.Message
			if l.Error.Type != "unknown" {
				// The error's class name, when the CLI knows it
				// (FatalTurnLimitedError, …); API errors say "unknown".
				res.TerminalReason = l.Error.Type
			}
			if m := statusRE.FindStringSubmatch(l.Error.Message); m != nil {
				res.APIErrorStatus, _ = strconv.Atoi(m[1])
			}
		}
		if l.Stats != nil {
			res.Usage = l.Stats.Usage()
			res.CostUSD, res.CostSource = EstimateCost(l.Stats, d.model)
		}
		emit(loop.Event{Kind: loop.EventResult, At: at, SessionID: d.session, Subtype: l.Status, Text: res.Text,
			IsError: res.IsError, Result: res})
	}
}

// turn counts a model turn when output comes after the prompt or a tool
// result: the CLI reports no turn count, and each model reply starts with
// text or a tool call.
func (d *Decoder) turn() {
	if !d.inTurn {
		d.turns++
		d.inTurn = true
	}
}

// Flush emits the assistant message in progress, if any, as one EventText.
func (d *Decoder) Flush(emit func(loop.Event)) {
	if !d.inText {
		return
	}
	text := string(d.text)
	d.text, d.inText = d.text[:0], false
	if cap(d.text) > 1<<20 {
		d.text = nil
	}
	emit(loop.Event{Kind: loop.EventText, At: d.now(), SessionID: d.session, Text: text})
}

// keyArgs are the parameters that say what a tool call does, in the order
// they are looked for: run_shell_command's command, the file tools'
// file_path, list_directory's dir_path, glob's and grep_search's pattern,
// google_web_search's query, web_fetch's prompt (it holds the URLs).
var keyArgs = []string{"command", "file_path", "dir_path", "pattern", "path", "query", "url", "prompt"}

// keyArg returns a tool call's key argument, or its JSON input cut to
// inputLimit bytes.
func keyArg(params json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) == nil {
		for _, k := range keyArgs {
			var s string
			if v, ok := m[k]; ok && json.Unmarshal(v, &s) == nil && s != "" {
				return s
			}
		}
	}
	if len(params) == 0 || string(params) == "null" {
		return ""
	}
	return cut(string(params), inputLimit)
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func quote(raw []byte) string { return cut(string(raw), malformedQuote) }
