package claude

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
)

// ToolOutputLimit is the most bytes of a tool's output kept in an
// EventToolResult's Text: agentproc.ToolOutputLimit.
const ToolOutputLimit = agentproc.ToolOutputLimit

// The top-level line types of Claude Code's stream-json.
const (
	TypeSystem      = "system"
	TypeAssistant   = "assistant"
	TypeUser        = "user"
	TypeStreamEvent = "stream_event"
	TypeRateLimit   = "rate_limit_event"
	TypeResult      = "result"
)

// Line is one decoded line of the stream.
type Line struct {
	// Type is the line's top-level "type" ("system", "assistant", …, or a
	// type this package does not know); empty for a malformed line.
	Type string
	// Subtype is the system line's subtype, the stream_event's inner event
	// type, or the rate_limit_event's status.
	Subtype string
	// Raw is the line as read, without its newline. It is only valid until
	// the next call to Decode. It is nil for a line of more than 4 MB read
	// by Decode: such a line's memory is given back as soon as it is
	// decoded, and its big strings' memory while they are copied out of
	// it, so that a huge line costs about one copy of itself.
	Raw []byte
	// Events are the typed events the line carries: none for lines that
	// only matter to the raw log (stream_event, unknown types), one
	// EventMalformed for a line that is not a JSON object. The slice is
	// reused by the next call to Decode.
	Events []loop.Event
}

// Decoder reads Claude Code's stream-json (one JSON object a line) and turns
// each line into typed events. Lines may be of any length. A Decoder is not
// safe for concurrent use.
type Decoder struct {
	// Now stamps events; nil means time.Now.
	Now func() time.Time

	lines  *agentproc.LineReader
	events []loop.Event      // reused by each Decode
	tools  map[string]string // tool_use id → tool name, to name tool results
	at     time.Time         // the current line's time stamp

	// The current line's message, read in the same pass as the line.
	blocks   []contentBlock
	msgModel []byte
	scratch  []byte // tool output being unescaped, or a piece of a big string

	// lastText is the last assistant text: the result line repeats it,
	// and a huge answer must not cost two copies.
	lastText string

	// Every line repeats the session id and most repeat the model: the
	// last ones are kept to save an allocation per line.
	sessionID, model string
}

// intern returns the string of the raw JSON string val, reusing *last
// when it is the same.
func intern(last *string, val []byte) string {
	if len(val) >= 2 && val[0] == '"' && string(val[1:len(val)-1]) == *last {
		return *last
	}
	*last = jsonString(val)
	return *last
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{lines: agentproc.NewLineReader(r), tools: make(map[string]string)}
}

// Reset makes d read a new stream from r, keeping its buffers.
func (d *Decoder) Reset(r io.Reader) {
	d.lines.Reset(r)
	clear(d.tools)
	d.sessionID, d.model, d.lastText = "", "", ""
}

// Decode reads and decodes the next non-blank line. It returns io.EOF after
// the last line, and any other read error as is. A line that cannot be
// parsed is not an error: it comes back with one EventMalformed.
func (d *Decoder) Decode() (Line, error) {
	for {
		raw, err := d.lines.ReadLine()
		if err != nil {
			return Line{}, err
		}
		raw = bytes.TrimRight(raw, "\r\n")
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		line := d.DecodeLine(raw)
		if d.lines.Huge() {
			// Nothing refers to the line any more (the events hold
			// copies): give its memory back before the next one comes.
			clear(d.blocks)
			d.blocks, d.msgModel, line.Raw = d.blocks[:0], nil, nil
			d.lines.Release()
		}
		return line, nil
	}
}

// fields holds the raw values of the top-level keys the decoder looks at.
type fields struct {
	typ, subtype, sessionID, model, event, rateLimitInfo      []byte
	result, isError, numTurns, durationMS, costUSD, usage     []byte
	terminalReason, apiErrorStatus, errs, status              []byte
	errorStatus, errorName, attempt, maxRetries, retryDelayMS []byte
	apiError, compactMeta                                     []byte
}

func (f *fields) set(key, val []byte) {
	switch string(key) {
	case "type":
		f.typ = val
	case "subtype":
		f.subtype = val
	case "session_id":
		f.sessionID = val
	case "model":
		f.model = val
	case "event":
		f.event = val
	case "rate_limit_info":
		f.rateLimitInfo = val
	case "result":
		f.result = val
	case "is_error":
		f.isError = val
	case "num_turns":
		f.numTurns = val
	case "duration_ms":
		f.durationMS = val
	case "total_cost_usd":
		f.costUSD = val
	case "usage":
		f.usage = val
	case "terminal_reason":
		f.terminalReason = val
	case "api_error_status":
		f.apiErrorStatus = val
	case "errors":
		f.errs = val
	case "status":
		f.status = val
	case "error_status":
		f.errorStatus = val
	case "error":
		f.errorName = val
	case "attempt":
		f.attempt = val
	case "max_retries":
		f.maxRetries = val
	case "retry_delay_ms":
		f.retryDelayMS = val
	case "api_error":
		f.apiError = val
	case "compact_metadata", "compactMetadata":
		f.compactMeta = val
	}
}

// DecodeLine decodes one line (without its newline). The returned Line's
// Raw is raw itself, and its Events are reused by the next call.
func (d *Decoder) DecodeLine(raw []byte) Line {
	clear(d.events) // the last line's texts must not outlive their use
	d.events = d.events[:0]
	if d.Now != nil {
		d.at = d.Now()
	} else {
		d.at = time.Now()
	}
	line := Line{Raw: raw}
	var f fields
	clear(d.blocks)
	d.blocks, d.msgModel = d.blocks[:0], nil
	end, err := walkObject(raw, 0, func(key []byte, i int) (int, error) {
		if string(key) == "message" {
			return d.parseMessage(raw, i)
		}
		end, err := skipValue(raw, i)
		if err != nil {
			return 0, err
		}
		f.set(key, raw[i:end])
		return end, nil
	})
	if err == nil && skipWS(raw, end) != len(raw) {
		err = errSyntax
	}
	if err != nil {
		d.events = append(d.events, d.event(loop.Event{
			Kind: loop.EventMalformed,
			Text: agentproc.Malformed(raw),
			Err:  fmt.Errorf("claude: malformed stream line: %w", err),
		}))
		line.Events = d.events
		return line
	}
	line.Type = lineType(f.typ)
	sessionID := intern(&d.sessionID, f.sessionID)
	switch line.Type {
	case TypeSystem:
		line.Subtype = jsonString(f.subtype)
		d.system(&f, line.Subtype, sessionID)
	case TypeAssistant:
		d.assistant(sessionID)
	case TypeUser:
		d.user(sessionID)
	case TypeStreamEvent:
		if len(f.event) > 0 {
			_, _ = eachField(f.event, func(k, v []byte) {
				if string(k) == "type" {
					line.Subtype = jsonString(v)
				}
			})
		}
	case TypeRateLimit:
		line.Subtype = d.rateLimit(f.rateLimitInfo, sessionID)
	case TypeResult:
		line.Subtype = jsonString(f.subtype)
		d.result(&f, sessionID)
	}
	line.Events = d.events
	return line
}

func (d *Decoder) event(ev loop.Event) loop.Event {
	ev.At = d.at
	return ev
}

// lineType returns the line's type, without allocating for the known ones.
func lineType(val []byte) string {
	if len(val) < 2 || val[0] != '"' {
		return jsonString(val)
	}
	switch t := val[1 : len(val)-1]; string(t) {
	case TypeSystem:
		return TypeSystem
	case TypeAssistant:
		return TypeAssistant
	case TypeUser:
		return TypeUser
	case TypeStreamEvent:
		return TypeStreamEvent
	case TypeRateLimit:
		return TypeRateLimit
	case TypeResult:
		return TypeResult
	}
	return jsonString(val)
}

func (d *Decoder) emit(ev loop.Event) { d.events = append(d.events, d.event(ev)) }

func (d *Decoder) system(f *fields, subtype, sessionID string) {
	ev := loop.Event{Kind: loop.EventSystem, Subtype: subtype, SessionID: sessionID}
	switch subtype {
	case "init":
		ev.Kind = loop.EventInit
		ev.Model = jsonString(f.model)
	case "api_retry":
		// Built by hand: these lines come by the dozen, fmt is slow.
		b := make([]byte, 0, 64)
		b = append(b, "API error "...)
		b = append(b, rawNumber(f.errorStatus)...)
		b = append(b, ' ')
		b = append(b, jsonString(f.errorName)...)
		b = append(b, "; retry "...)
		b = strconv.AppendInt(b, jsonInt(f.attempt), 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, jsonInt(f.maxRetries), 10)
		b = append(b, " in "...)
		b = strconv.AppendInt(b, jsonInt(f.retryDelayMS), 10)
		b = append(b, "ms"...)
		ev.Text = string(b)
		ev.IsError = true
	case "status":
		ev.Text = jsonString(f.status)
	case "compact_boundary":
		ev.Text = compactText(f.compactMeta)
	}
	d.emit(ev)
}

// compactText describes a compact boundary from its metadata (snake_case
// in the stream, camelCase in session files: both are read).
func compactText(meta []byte) string {
	var trigger string
	var pre int64
	if len(meta) > 0 && meta[0] == '{' {
		_, _ = eachField(meta, func(k, v []byte) {
			switch string(k) {
			case "trigger":
				trigger = jsonString(v)
			case "pre_tokens", "preTokens":
				pre = jsonInt(v)
			}
		})
	}
	text := "context compacted"
	switch {
	case trigger != "" && pre > 0:
		text += " (" + trigger + ", " + strconv.FormatInt(pre, 10) + " tokens before)"
	case trigger != "":
		text += " (" + trigger + ")"
	}
	return text
}

// rawNumber renders a numeric field as written ("null" or absent gives "?").
func rawNumber(val []byte) string {
	if len(val) == 0 || val[0] == 'n' {
		return "?"
	}
	return string(val)
}

// contentBlock holds the raw fields of one content block of a message.
type contentBlock struct {
	typ, text, thinking, name, id, input, toolUseID, content, isError []byte
}

// parseMessage reads the message object at b[i] in the line's own pass:
// its content blocks go to d.blocks and its model to d.msgModel.
func (d *Decoder) parseMessage(b []byte, i int) (int, error) {
	if b[i] != '{' {
		return skipValue(b, i)
	}
	return walkObject(b, i, func(key []byte, i int) (int, error) {
		switch string(key) {
		case "content":
			if b[i] == '[' {
				return walkArray(b, i, func(i int) (int, error) { return d.parseBlock(b, i) })
			}
		case "model":
			end, err := skipValue(b, i)
			if err == nil {
				d.msgModel = b[i:end]
			}
			return end, err
		}
		return skipValue(b, i)
	})
}

// parseBlock reads one content block at b[i].
func (d *Decoder) parseBlock(b []byte, i int) (int, error) {
	if b[i] != '{' {
		return skipValue(b, i)
	}
	var cb contentBlock
	end, err := walkObject(b, i, func(key []byte, i int) (int, error) {
		end, err := skipValue(b, i)
		if err != nil {
			return 0, err
		}
		v := b[i:end]
		switch string(key) {
		case "type":
			cb.typ = v
		case "text":
			cb.text = v
		case "thinking":
			cb.thinking = v
		case "name":
			cb.name = v
		case "id":
			cb.id = v
		case "input":
			cb.input = v
		case "tool_use_id":
			cb.toolUseID = v
		case "content":
			cb.content = v
		case "is_error":
			cb.isError = v
		}
		return end, nil
	})
	if err == nil {
		d.blocks = append(d.blocks, cb)
	}
	return end, err
}

// assistant emits one event per content block of an assistant message.
func (d *Decoder) assistant(sessionID string) {
	modelName := intern(&d.model, d.msgModel)
	for _, b := range d.blocks {
		switch string(b.typ) {
		case `"text"`:
			d.lastText = d.text(b.text, "")
			d.emit(loop.Event{Kind: loop.EventText, SessionID: sessionID, Model: modelName, Text: d.lastText})
		case `"thinking"`:
			d.emit(loop.Event{Kind: loop.EventThinking, SessionID: sessionID, Model: modelName, Text: d.text(b.thinking, "")})
		case `"tool_use"`:
			tool := jsonString(b.name)
			if len(d.tools) > 4096 { // a bound, in case results never come
				clear(d.tools)
			}
			d.tools[jsonString(b.id)] = tool
			d.emit(loop.Event{Kind: loop.EventToolUse, SessionID: sessionID, Model: modelName, Tool: tool, Input: keyArgument(tool, b.input)})
		}
	}
}

// keyArguments names, per tool, the input field that best says what the
// call does.
var keyArguments = map[string]string{
	"Bash":         "command",
	"Read":         "file_path",
	"Write":        "file_path",
	"Edit":         "file_path",
	"MultiEdit":    "file_path",
	"NotebookEdit": "notebook_path",
	"Glob":         "pattern",
	"Grep":         "pattern",
	"WebFetch":     "url",
	"WebSearch":    "query",
	"Task":         "description",
	"Agent":        "description",
	"Skill":        "skill",
}

// inputLimit bounds the JSON input kept for a tool without a key argument.
const inputLimit = 512

// keyArgument returns the tool call's key argument, or its JSON input
// (shortened) when the tool has none or the field is missing.
func keyArgument(tool string, input []byte) string {
	if key, ok := keyArguments[tool]; ok && len(input) > 0 && input[0] == '{' {
		var val []byte
		_, _ = eachField(input, func(k, v []byte) {
			if keyIs(k, key) {
				val = v
			}
		})
		if len(val) > 0 && val[0] == '"' {
			return jsonString(val)
		}
	}
	if len(input) > inputLimit {
		return string(input[:inputLimit]) + "…"
	}
	return string(input)
}

// user emits an event for every tool_result block of a user message.
func (d *Decoder) user(sessionID string) {
	for _, b := range d.blocks {
		if string(b.typ) != `"tool_result"` {
			continue
		}
		id := jsonString(b.toolUseID)
		tool := d.tools[id]
		delete(d.tools, id)
		d.emit(loop.Event{Kind: loop.EventToolResult, SessionID: sessionID, Tool: tool,
			Text: d.toolOutput(b.content), IsError: jsonBool(b.isError)})
	}
}

// toolOutput returns a tool_result's content, a string or a list of text
// blocks, cut to ToolOutputLimit bytes.
func (d *Decoder) toolOutput(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	if body[0] == '"' {
		inner := body[1 : len(body)-1]
		if bytes.IndexByte(inner, '\\') < 0 {
			return jsonStringMax(body, ToolOutputLimit) // no escapes: one copy
		}
		d.scratch = appendUnescaped(d.scratch[:0], inner, ToolOutputLimit)
		return string(d.scratch)
	}
	if body[0] != '[' {
		return ""
	}
	out := d.scratch[:0]
	_ = eachElem(body, func(block []byte) {
		left := ToolOutputLimit - len(out)
		if left <= 0 || len(block) == 0 || block[0] != '{' {
			return
		}
		var text []byte
		_, _ = eachField(block, func(k, v []byte) {
			if string(k) == "text" {
				text = v
			}
		})
		if len(text) < 2 || text[0] != '"' {
			return
		}
		if len(out) > 0 {
			out = append(out, '\n')
			left--
		}
		out = appendUnescaped(out, text[1:len(text)-1], max(left, 0))
	})
	d.scratch = out
	return string(out)
}

// rateLimit emits the event of a rate_limit_event line and returns its
// status.
func (d *Decoder) rateLimit(info []byte, sessionID string) string {
	var status, resetsAt, limitType, utilization []byte
	if len(info) > 0 {
		_, _ = eachField(info, func(k, v []byte) {
			switch string(k) {
			case "status":
				status = v
			case "resetsAt":
				resetsAt = v
			case "rateLimitType":
				limitType = v
			case "utilization":
				utilization = v
			}
		})
	}
	ul := &loop.UsageLimit{Type: jsonString(limitType)}
	if secs := jsonInt(resetsAt); secs > 0 {
		ul.ResetsAt = time.Unix(secs, 0).UTC()
	}
	st := jsonString(status)
	text := st
	if ul.Type != "" {
		text += " " + ul.Type
	}
	if len(utilization) > 0 && utilization[0] != 'n' {
		u := jsonFloat(utilization)
		if u <= 1 && bytes.IndexByte(utilization, '.') >= 0 {
			u *= 100 // a fraction (0.99), not a percentage (99)
		}
		text += " " + strconv.FormatFloat(u, 'f', -1, 64) + "% used"
	}
	if !ul.ResetsAt.IsZero() {
		text += "; resets at " + ul.ResetsAt.Format(time.RFC3339)
	}
	if st == "rejected" {
		ul.Message = strings.TrimSpace(text)
	}
	d.emit(loop.Event{Kind: loop.EventRateLimit, SessionID: sessionID, Subtype: st, Text: strings.TrimSpace(text), UsageLimit: ul})
	return st
}

// result emits the EventResult of the result line, with the fields of the
// line in a RunResult (Class is left for classification).
func (d *Decoder) result(f *fields, sessionID string) {
	res := &loop.RunResult{
		Text:           d.text(f.result, d.lastText),
		IsError:        jsonBool(f.isError),
		SessionID:      sessionID,
		Turns:          int(jsonInt(f.numTurns)),
		Duration:       time.Duration(jsonInt(f.durationMS)) * time.Millisecond,
		CostUSD:        jsonFloat(f.costUSD),
		Subtype:        jsonString(f.subtype),
		TerminalReason: jsonString(f.terminalReason),
		APIErrorStatus: int(jsonInt(f.apiErrorStatus)),
	}
	if len(f.usage) > 0 && f.usage[0] == '{' {
		_, _ = eachField(f.usage, func(k, v []byte) {
			switch string(k) {
			case "input_tokens":
				res.Usage.InputTokens = jsonInt(v)
			case "output_tokens":
				res.Usage.OutputTokens = jsonInt(v)
			case "cache_read_input_tokens":
				res.Usage.CacheReadTokens = jsonInt(v)
			case "cache_creation_input_tokens":
				res.Usage.CacheWriteTokens = jsonInt(v)
			}
		})
	}
	if jsonString(f.apiError) == "usage_limit_reached" {
		// Newer releases name the limit in a field: no need to read the
		// text to know, only to learn the reset time.
		res.UsageLimit = &loop.UsageLimit{Message: res.Text}
	}
	text := res.Text
	if text == "" && len(f.errs) > 0 && f.errs[0] == '[' {
		var errs []string
		_ = eachElem(f.errs, func(v []byte) {
			if s := jsonString(v); s != "" {
				errs = append(errs, s)
			}
		})
		text = strings.Join(errs, "; ")
	}
	clear(d.tools)
	d.lastText = ""
	d.emit(loop.Event{Kind: loop.EventResult, SessionID: sessionID, Subtype: res.Subtype, Text: text, IsError: res.IsError, Result: res})
}

// bigText is the size from which a text is decoded a piece at a time
// (bigStep bytes of the line at once): the line's memory is given back as
// the text is copied out of it.
const (
	bigText = 256 << 10
	bigStep = 256 << 10
)

// text decodes the raw JSON string val, which may be huge (an assistant
// text, a result). When it decodes to same, same is returned: the result
// line repeats the last assistant text, and the two share their memory.
// A text in the line's own memory (see agentproc.LineReader) has the memory it was
// read from given back as it is decoded: the line must not be read there
// again.
func (d *Decoder) text(val []byte, same string) string {
	if len(val) < 2 || val[0] != '"' {
		return ""
	}
	inner := val[1 : len(val)-1]
	if len(inner) < bigText {
		if s := jsonString(val); s != same {
			return s
		}
		return same
	}
	n := len(inner)
	escaped := bytes.IndexByte(inner, '\\') >= 0
	if escaped {
		n = unescapedLen(inner)
	}
	off, owned := d.lines.Offset(inner)
	freed := off // memory of the line before freed was given back
	var sb strings.Builder
	compare := n == len(same) // until a difference shows
	if !compare {
		sb.Grow(n) // exactly: no copy on the way, no zeroing
	}
	done := 0 // bytes decoded
	for i := 0; i < len(inner); {
		piece := inner[i:min(i+bigStep, len(inner))]
		next := i + len(piece)
		if escaped {
			d.scratch, next = unescapeStep(d.scratch[:0], inner, i, next, -1)
			piece = d.scratch
		}
		if compare && (done+len(piece) > len(same) || string(piece) != same[done:done+len(piece)]) {
			compare = false
			sb.Grow(n)
			sb.WriteString(same[:done])
		}
		if !compare {
			sb.Write(piece)
		}
		done += len(piece)
		i = next
		if owned {
			freed = d.lines.Discard(freed, off+i)
		}
	}
	if cap(d.scratch) > 2*bigStep {
		d.scratch = nil
	}
	if compare {
		return same
	}
	return sb.String()
}
