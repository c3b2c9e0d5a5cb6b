package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
)

// ToolOutputLimit is the most bytes of a tool's output kept in an
// EventToolResult's Text: agentproc.ToolOutputLimit.
const ToolOutputLimit = agentproc.ToolOutputLimit

// inputLimit bounds the JSON arguments kept as an EventToolUse's Input.
const inputLimit = 512

// The top-level line types of `codex exec --json`.
const (
	TypeThreadStarted = "thread.started"
	TypeTurnStarted   = "turn.started"
	TypeTurnCompleted = "turn.completed"
	TypeTurnFailed    = "turn.failed"
	TypeItemStarted   = "item.started"
	TypeItemUpdated   = "item.updated"
	TypeItemCompleted = "item.completed"
	TypeError         = "error"
)

// The Subtypes of the EventSystem events the decoder emits.
const (
	SubtypeTurnStarted = "turn_started" // a turn.started line
	SubtypeRetry       = "api_retry"    // a "Reconnecting..." error line: Codex retries
	SubtypeError       = "error"        // another top-level error line (not fatal by itself)
	SubtypeWarning     = "warning"      // an item of type error ("Model metadata … not found")
)

// ToolExec is the Tool name of shell commands (Codex's exec_command).
const ToolExec = "exec"

// Line is one decoded line of the stream.
type Line struct {
	// Type is the line's top-level "type", or "" for a malformed line.
	Type string
	// Raw is the line as read, without its newline; valid until the next
	// call to Decode, and nil for a line of more than 4 MiB (its memory is
	// given back at once).
	Raw []byte
	// Events are the line's events: none for lines of unknown type, one
	// EventMalformed for a line that is not a JSON object.
	Events []loop.Event
}

// Decoder reads the JSON lines of `codex exec --json` and turns each into
// typed events. Lines may be of any length. A Decoder is not safe for
// concurrent use.
type Decoder struct {
	// Now stamps events and resolves usage-limit reset times; nil means
	// time.Now.
	Now func() time.Time
	// Location is the time zone of the reset times in Codex's usage-limit
	// messages (Codex prints them in its own local time); nil means
	// time.Local.
	Location *time.Location

	r        *agentproc.LineReader
	started  map[string]bool // ids of items whose item.started was seen
	threadID string
	lastText string // the last agent_message, the text of the result
	limit    *loop.UsageLimit
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: agentproc.NewLineReader(r), started: make(map[string]bool)}
}

// Decode reads and decodes the next non-blank line. It returns io.EOF after
// the last line, and any other read error as is. A line that cannot be
// parsed is not an error: it comes back with one EventMalformed.
func (d *Decoder) Decode() (Line, error) {
	for {
		raw, err := d.r.ReadLine()
		if err != nil {
			return Line{}, err
		}
		raw = bytes.TrimRight(raw, "\r\n")
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		line := d.DecodeLine(raw)
		if d.r.Huge() {
			// The events hold copies: a huge line's memory goes back
			// before the next one comes.
			d.r.Release()
			line.Raw = nil
		}
		return line, nil
	}
}

// Decode reads r to its end and calls emit for every event, in order: the
// shape of agentproc.Spec.Decode. io.EOF is not an error.
func Decode(r io.Reader, emit func(loop.Event)) error {
	return decodeWith(NewDecoder(r), emit)
}

func decodeWith(d *Decoder, emit func(loop.Event)) error {
	for {
		line, err := d.Decode()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		for _, ev := range line.Events {
			emit(ev)
		}
	}
}

// wireLine is one line of the stream, the fields the decoder reads.
type wireLine struct {
	Type     string     `json:"type"`
	ThreadID string     `json:"thread_id"`
	Message  string     `json:"message"`
	Item     *wireItem  `json:"item"`
	Usage    *wireUsage `json:"usage"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type wireItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Message          string          `json:"message"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	ExitCode         *int            `json:"exit_code"`
	Status           string          `json:"status"`
	Query            string          `json:"query"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            *struct {
		Message string `json:"message"`
	} `json:"error"`
	Changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
}

type wireUsage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
}

// DecodeLine decodes one line (without its newline).
func (d *Decoder) DecodeLine(raw []byte) Line {
	at := d.now()
	var w wireLine
	err := json.Unmarshal(raw, &w)
	if err == nil && (len(raw) == 0 || bytes.TrimSpace(raw)[0] != '{') {
		err = errors.New("not a JSON object")
	}
	if err != nil {
		return Line{Raw: raw, Events: []loop.Event{{Kind: loop.EventMalformed, At: at, Text: agentproc.Malformed(raw),
			Err: fmt.Errorf("codex: malformed stream line: %w", err)}}}
	}
	line := Line{Type: w.Type, Raw: raw}
	emit := func(ev loop.Event) {
		ev.At = at
		if ev.SessionID == "" {
			ev.SessionID = d.threadID
		}
		line.Events = append(line.Events, ev)
	}
	switch w.Type {
	case TypeThreadStarted:
		d.threadID = w.ThreadID
		emit(loop.Event{Kind: loop.EventInit, SessionID: w.ThreadID})
	case TypeTurnStarted:
		emit(loop.Event{Kind: loop.EventSystem, Subtype: SubtypeTurnStarted})
	case TypeItemStarted, TypeItemCompleted:
		if w.Item != nil {
			d.item(w.Type == TypeItemCompleted, w.Item, emit)
		}
	case TypeError:
		d.errorLine(w.Message, at, emit)
	case TypeTurnCompleted:
		res := &loop.RunResult{Text: d.lastText, SessionID: d.threadID, Subtype: "success"}
		if u := w.Usage; u != nil {
			res.Usage = usageOf(u)
		}
		d.endTurn()
		emit(loop.Event{Kind: loop.EventResult, Subtype: res.Subtype, Text: res.Text, Result: res})
	case TypeTurnFailed:
		msg := ""
		if w.Error != nil {
			msg = w.Error.Message
		}
		res := &loop.RunResult{Text: msg, IsError: true, SessionID: d.threadID, Subtype: "error"}
		if ul := UsageLimitOf(msg, at, d.location()); ul != nil {
			res.UsageLimit = ul
		} else if d.limit != nil {
			ul := *d.limit
			res.UsageLimit = &ul
		}
		d.endTurn()
		emit(loop.Event{Kind: loop.EventResult, Subtype: res.Subtype, Text: msg, IsError: true, Result: res})
	}
	return line
}

func (d *Decoder) endTurn() {
	d.lastText, d.limit = "", nil
	clear(d.started)
}

func (d *Decoder) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Decoder) location() *time.Location {
	if d.Location != nil {
		return d.Location
	}
	return time.Local
}

// usageOf maps Codex's token counts to loop.Usage. In OpenAI's accounting
// input_tokens counts every input token, the cached ones too; loop.Usage
// counts them apart. output_tokens includes the reasoning tokens.
func usageOf(u *wireUsage) loop.Usage {
	return loop.Usage{
		InputTokens:      max(u.InputTokens-u.CachedInputTokens-u.CacheWriteInputTokens, 0),
		CacheReadTokens:  u.CachedInputTokens,
		CacheWriteTokens: u.CacheWriteInputTokens,
		OutputTokens:     u.OutputTokens,
	}
}

// errorLine handles a top-level error line: a retry notice, a usage limit
// or another error, none of them fatal by itself (turn.failed is).
func (d *Decoder) errorLine(msg string, at time.Time, emit func(loop.Event)) {
	if strings.HasPrefix(msg, "Reconnecting...") {
		emit(loop.Event{Kind: loop.EventSystem, Subtype: SubtypeRetry, Text: msg, IsError: true})
		return
	}
	if ul := UsageLimitOf(msg, at, d.location()); ul != nil {
		d.limit = ul
		emit(loop.Event{Kind: loop.EventRateLimit, Subtype: "rejected", Text: msg, UsageLimit: ul})
		return
	}
	emit(loop.Event{Kind: loop.EventSystem, Subtype: SubtypeError, Text: msg, IsError: true})
}

// item handles item.started and item.completed. A tool item gives its
// EventToolUse when it starts (or when it completes, if its start was not
// seen) and its EventToolResult when it completes.
func (d *Decoder) item(completed bool, it *wireItem, emit func(loop.Event)) {
	use := func(tool, input string) {
		if completed {
			if d.started[it.ID] {
				delete(d.started, it.ID)
				return
			}
		} else {
			if len(d.started) > 4096 { // a bound, in case completions never come
				clear(d.started)
			}
			d.started[it.ID] = true
		}
		emit(loop.Event{Kind: loop.EventToolUse, Tool: tool, Input: input})
	}
	switch it.Type {
	case "agent_message":
		if completed {
			d.lastText = it.Text
			emit(loop.Event{Kind: loop.EventText, Text: it.Text})
		}
	case "reasoning":
		if completed {
			emit(loop.Event{Kind: loop.EventThinking, Text: it.Text})
		}
	case "command_execution":
		use(ToolExec, ShellCommand(it.Command))
		if completed {
			failed := it.Status == "failed" || it.Status == "declined" || (it.ExitCode != nil && *it.ExitCode != 0)
			emit(loop.Event{Kind: loop.EventToolResult, Tool: ToolExec, Text: agentproc.Cut(it.AggregatedOutput, ToolOutputLimit), IsError: failed})
		}
	case "file_change":
		var paths []string
		for _, c := range it.Changes {
			paths = append(paths, c.Path)
		}
		use("apply_patch", strings.Join(paths, " "))
		if completed {
			var lines []string
			for _, c := range it.Changes {
				lines = append(lines, c.Kind+" "+c.Path)
			}
			emit(loop.Event{Kind: loop.EventToolResult, Tool: "apply_patch", Text: agentproc.Cut(strings.Join(lines, "\n"), ToolOutputLimit), IsError: it.Status == "failed"})
		}
	case "mcp_tool_call":
		tool := "mcp__" + it.Server + "__" + it.Tool
		use(tool, agentproc.Cut(string(it.Arguments), inputLimit))
		if completed {
			text := agentproc.Cut(string(it.Result), ToolOutputLimit)
			if it.Error != nil && it.Error.Message != "" {
				text = it.Error.Message
			}
			emit(loop.Event{Kind: loop.EventToolResult, Tool: tool, Text: text, IsError: it.Status == "failed" || it.Error != nil})
		}
	case "web_search":
		use("web_search", it.Query)
	case "error":
		if completed {
			emit(loop.Event{Kind: loop.EventSystem, Subtype: SubtypeWarning, Text: it.Message})
		}
	}
}

// ShellCommand returns the command of a command_execution item without the
// shell wrapper Codex adds ("/bin/bash -lc 'echo hi'" gives "echo hi"); a
// command of another shape comes back as it is.
func ShellCommand(cmd string) string {
	i := strings.Index(cmd, " -lc '")
	if i < 0 || strings.ContainsRune(cmd[:i], ' ') || !strings.HasSuffix(cmd, "'") || len(cmd) <= i+len(" -lc '")+1 {
		return cmd
	}
	inner := cmd[i+len(" -lc '") : len(cmd)-1]
	// Inside single quotes, a quote is written '\''.
	parts := strings.Split(inner, `'\''`)
	for _, p := range parts {
		if strings.ContainsRune(p, '\'') {
			return cmd // not one quoted word
		}
	}
	return strings.Join(parts, "'")
}

// limitRE finds Codex's usage-limit messages ("You've hit your usage
// limit. … try again at 7:07 AM."); resetRE their reset time.
var (
	limitRE = regexp.MustCompile(`(?i)\bhit your usage limit\b|\busage limit (?:has been )?reached\b|\bout of credits\b`)
	resetRE = regexp.MustCompile(`(?i)\btry again at ([^.]+)`)
	// ordinalRE matches the day's suffix in "Nov 26th, 2026".
	ordinalRE = regexp.MustCompile(`(\d)(?:st|nd|rd|th)\b`)
)

// UsageLimitOf returns the usage limit a Codex error message reports, or
// nil when it reports none. The reset time is read from "try again at 7:07
// AM" (today, or tomorrow when that is past) or "try again at Nov 26th,
// 2026 6:07 AM", in loc (Codex prints its own local time); it is zero when
// the message gives none.
func UsageLimitOf(msg string, now time.Time, loc *time.Location) *loop.UsageLimit {
	if !limitRE.MatchString(msg) {
		return nil
	}
	ul := &loop.UsageLimit{Message: strings.TrimSpace(msg)}
	if m := resetRE.FindStringSubmatch(msg); m != nil {
		ul.ResetsAt = parseReset(strings.TrimSpace(m[1]), now, loc)
	}
	return ul
}

// parseReset reads a reset time as Codex formats it.
func parseReset(s string, now time.Time, loc *time.Location) time.Time {
	s = strings.Join(strings.Fields(ordinalRE.ReplaceAllString(s, "$1")), " ")
	local := now.In(loc)
	for _, layout := range []string{"3:04 PM", "3:04PM", "15:04"} {
		t, err := time.ParseInLocation(layout, strings.ToUpper(s), loc)
		if err != nil {
			continue
		}
		next := time.Date(local.Year(), local.Month(), local.Day(), t.Hour(), t.Minute(), 0, 0, loc)
		if next.Before(now.Add(-time.Minute)) { // printed to the minute: a minute late is today
			next = next.AddDate(0, 0, 1)
		}
		return next.UTC()
	}
	for _, layout := range []string{"Jan 2, 2006 3:04 PM", "Jan 2 2006 3:04 PM", "Jan 2, 3:04 PM"} {
		t, err := time.ParseInLocation(layout, s, loc)
		if err != nil {
			continue
		}
		if t.Year() == 0 {
			t = time.Date(local.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0, loc)
		}
		return t.UTC()
	}
	return time.Time{}
}
