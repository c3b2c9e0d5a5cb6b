package opencode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
)

// ToolOutputLimit is the most bytes of a tool's output kept in an
// EventToolResult's Text: agentproc.ToolOutputLimit.
const ToolOutputLimit = agentproc.ToolOutputLimit

// inputLimit bounds the JSON input kept as an EventToolUse's Input when
// the tool has no key argument.
const inputLimit = 512

// The line types of `opencode run --format json`. There is no terminal
// line: the stream ends after the last step_finish.
const (
	TypeStepStart  = "step_start"
	TypeStepFinish = "step_finish"
	TypeToolUse    = "tool_use"
	TypeText       = "text"
	TypeReasoning  = "reasoning" // only with --thinking
	TypeError      = "error"
)

// ReasonStop is the step_finish reason of the session's last step: the
// model answered without calling a tool.
const ReasonStop = "stop"

// SubtypeError is the Subtype of the EventSystem an error line gives.
const SubtypeError = "error"

// Line is one decoded line of the stream.
type Line struct {
	// Type is the line's "type", or "" for a malformed line.
	Type string
	// Raw is the line as read, without its newline; valid until the next
	// call to Decode, and nil for a line of more than 4 MiB.
	Raw []byte
	// Events are the line's events: none for step_start, a step_finish
	// that does not end the session, and lines of unknown type.
	Events []loop.Event
}

// Decoder reads the JSON lines of `opencode run --format json` and turns
// each into events, gathering the Session they make. Lines may be of any
// length. A Decoder is not safe for concurrent use.
type Decoder struct {
	// Now stamps events; nil means time.Now.
	Now func() time.Time

	r    *agentproc.LineReader
	sess Session
	// stepTexts are the text parts of the step under way.
	stepTexts []string
	inited    bool
}

// NewDecoder returns a Decoder reading r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: agentproc.NewLineReader(r)}
}

// Session returns what the stream has said so far. The Decoder keeps
// updating it.
func (d *Decoder) Session() *Session { return &d.sess }

func (d *Decoder) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Decode reads and decodes the next line. Empty lines are skipped. It
// returns io.EOF after the last line.
func (d *Decoder) Decode() (Line, error) {
	for {
		raw, err := d.r.ReadLine()
		if len(raw) == 0 && err != nil {
			return Line{}, err
		}
		raw = bytes.TrimRight(raw, "\r\n")
		if len(bytes.TrimSpace(raw)) == 0 {
			if err != nil {
				return Line{}, err
			}
			continue
		}
		line := d.Parse(raw)
		if d.r.Huge() {
			d.r.Release()
			line.Raw = nil
		}
		return line, nil
	}
}

// Run decodes the whole stream, calling emit for every event in order:
// the shape of agentproc.Spec.Decode. io.EOF and os.ErrClosed (the pipe
// closed under it) are not errors.
func (d *Decoder) Run(emit func(loop.Event)) error {
	for {
		line, err := d.Decode()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
		for _, ev := range line.Events {
			emit(ev)
		}
	}
}

// Decode decodes the stream r with a new Decoder: a Spec.Decode for
// callers that need no Session.
func Decode(r io.Reader, emit func(loop.Event)) error { return NewDecoder(r).Run(emit) }

// wireLine is a line of the stream, the fields ralph reads.
type wireLine struct {
	Type      string          `json:"type"`
	SessionID string          `json:"sessionID"`
	Part      *wirePart       `json:"part"`
	Error     json.RawMessage `json:"error"`
}

type wirePart struct {
	Type   string `json:"type"`
	Tool   string `json:"tool"`
	Text   string `json:"text"`
	Reason string `json:"reason"`
	State  *struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Output string          `json:"output"`
		Error  string          `json:"error"`
	} `json:"state"`
	Tokens *struct {
		Input     int64 `json:"input"`
		Output    int64 `json:"output"`
		Reasoning int64 `json:"reasoning"`
		Cache     struct {
			Read  int64 `json:"read"`
			Write int64 `json:"write"`
		} `json:"cache"`
	} `json:"tokens"`
	Cost float64 `json:"cost"`
}

// wireError is an error line's error: a NamedError of OpenCode's.
type wireError struct {
	Name string `json:"name"`
	Data struct {
		Message         string            `json:"message"`
		StatusCode      int               `json:"statusCode"`
		IsRetryable     bool              `json:"isRetryable"`
		ResponseBody    string            `json:"responseBody"`
		ResponseHeaders map[string]string `json:"responseHeaders"`
		ProviderID      string            `json:"providerID"`
	} `json:"data"`
}

// Parse decodes one line (without its newline) and records it in the
// Session.
func (d *Decoder) Parse(raw []byte) Line {
	now := d.now()
	var w wireLine
	if err := json.Unmarshal(raw, &w); err != nil || w.Type == "" {
		if err == nil {
			err = errors.New("no type")
		}
		d.sess.Malformed++
		return Line{Raw: raw, Events: []loop.Event{{Kind: loop.EventMalformed, At: now,
			Text: agentproc.Malformed(raw), Err: fmt.Errorf("opencode: malformed line: %w", err)}}}
	}
	line := Line{Type: w.Type, Raw: raw}
	add := func(ev loop.Event) {
		ev.At, ev.SessionID = now, w.SessionID
		line.Events = append(line.Events, ev)
	}
	if !d.inited && w.SessionID != "" {
		d.inited = true
		d.sess.SessionID = w.SessionID
		add(loop.Event{Kind: loop.EventInit})
	}
	p := w.Part
	if p == nil {
		p = &wirePart{}
	}
	switch w.Type {
	case TypeStepStart:
		d.stepTexts = d.stepTexts[:0]
	case TypeToolUse:
		in, out, isErr := "", "", false
		if s := p.State; s != nil {
			in = toolInput(s.Input)
			out, isErr = s.Output, s.Status == "error"
			if isErr && s.Error != "" {
				out = s.Error
			}
			if isErr && strings.Contains(out, rejectedPermission) {
				d.sess.Rejected = p.Tool
				if in != "" {
					d.sess.Rejected += " (" + agentproc.Cut(in, 80) + ")"
				}
			}
		}
		add(loop.Event{Kind: loop.EventToolUse, Tool: p.Tool, Input: in})
		add(loop.Event{Kind: loop.EventToolResult, Tool: p.Tool, Text: agentproc.Cut(out, ToolOutputLimit), IsError: isErr})
	case TypeText:
		d.stepTexts = append(d.stepTexts, p.Text)
		d.sess.LastText = p.Text
		add(loop.Event{Kind: loop.EventText, Text: p.Text})
	case TypeReasoning:
		add(loop.Event{Kind: loop.EventThinking, Text: p.Text})
	case TypeStepFinish:
		s := &d.sess
		s.Steps++
		s.Reason = p.Reason
		s.Cost += p.Cost
		if t := p.Tokens; t != nil {
			s.Usage.InputTokens += t.Input
			s.Usage.OutputTokens += t.Output + t.Reasoning
			s.Usage.CacheReadTokens += t.Cache.Read
			s.Usage.CacheWriteTokens += t.Cache.Write
		}
		s.FinalText = strings.Join(d.stepTexts, "\n")
		if p.Reason == ReasonStop {
			s.Stopped = true
			r := s.result()
			add(loop.Event{Kind: loop.EventResult, Subtype: p.Reason, Text: r.Text, Result: &r})
		}
	case TypeError:
		e := parseError(w.Error)
		d.sess.Errors = append(d.sess.Errors, e)
		add(loop.Event{Kind: loop.EventSystem, Subtype: SubtypeError, Text: e.String(), IsError: true})
	}
	return line
}

// parseError reads an error line's error; one that is not an object
// keeps its JSON as its message.
func parseError(raw json.RawMessage) Error {
	var w wireError
	if err := json.Unmarshal(raw, &w); err != nil {
		return Error{Name: "UnknownError", Message: string(raw)}
	}
	return Error{Name: w.Name, Message: w.Data.Message, StatusCode: w.Data.StatusCode,
		IsRetryable: w.Data.IsRetryable, ResponseBody: w.Data.ResponseBody,
		RetryAfter: w.Data.ResponseHeaders["retry-after"]}
}

// toolInput is a tool call's key argument (the bash command, the file
// path, the pattern, the URL), else its JSON input cut to inputLimit.
func toolInput(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		for _, k := range []string{"command", "filePath", "pattern", "url", "path", "description"} {
			if s, ok := m[k].(string); ok && s != "" {
				return s
			}
		}
	}
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	return agentproc.Cut(string(raw), inputLimit)
}
