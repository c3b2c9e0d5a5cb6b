package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// taskJSON is a task as list, show and peek print it: exactly
// these keys, in this order. parent_id is null when the task has none;
// feature and claimed_by are always strings, "" when unset, so a consumer
// compares them without null checks; blocked_by is [] when empty; check
// (the task's check command) and check_by (the agent that wrote it) are
// there only when set.
type taskJSON struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Status      string   `json:"status"`
	Priority    int      `json:"priority"`
	ParentID    *string  `json:"parent_id"`
	Feature     string   `json:"feature"`
	ClaimedBy   string   `json:"claimed_by"`
	RetryCount  int      `json:"retry_count"`
	BlockedBy   []string `json:"blocked_by"`
	Check       string   `json:"check,omitempty"`
	CheckBy     string   `json:"check_by,omitempty"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
}

// taskShowJSON is `task show --json`: the task and its log.
type taskShowJSON struct {
	taskJSON
	Logs []logJSON `json:"logs"`
}

// logJSON is one entry of a task's history: {at, kind, message, actor}.
type logJSON struct {
	At      string `json:"at"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Actor   string `json:"actor"`
}

// jsonTime formats t as RFC 3339 in UTC, with sub-second digits when it has
// any ("" for the zero time).
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func toJSON(t loop.Task) taskJSON {
	j := taskJSON{
		ID:          t.ID,
		Title:       t.Title,
		Description: t.Description,
		Status:      string(t.Status),
		Priority:    t.Priority,
		Feature:     t.Feature,
		ClaimedBy:   t.ClaimedBy,
		RetryCount:  t.RetryCount,
		BlockedBy:   t.BlockedBy,
		Check:       t.Check,
		CheckBy:     t.CheckBy,
		CreatedAt:   jsonTime(t.CreatedAt),
		UpdatedAt:   jsonTime(t.UpdatedAt),
	}
	if t.ParentID != "" {
		p := t.ParentID
		j.ParentID = &p
	}
	if j.BlockedBy == nil {
		j.BlockedBy = []string{}
	}
	return j
}

func tasksJSON(tasks []loop.Task) []taskJSON {
	out := make([]taskJSON, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, toJSON(t))
	}
	return out
}

func logsJSON(logs []loop.LogEntry) []logJSON {
	out := make([]logJSON, 0, len(logs))
	for _, l := range logs {
		out = append(out, logJSON{At: jsonTime(l.At), Kind: l.Kind, Message: l.Message, Actor: l.Actor})
	}
	return out
}

// writeJSON prints v indented, without HTML escaping, and a newline.
func writeJSON(w io.Writer, v any) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	return bw.Flush()
}

// taskListJSON streams `task list --json`: the bytes writeJSON prints for
// tasksJSON of the whole list, written one task at a time, so that a plan of
// any size lists in flat memory. Call task for each task, then end.
type taskListJSON struct {
	w     *bufio.Writer
	buf   []byte
	n     int
	times timeCache
}

func newTaskListJSON(w io.Writer) *taskListJSON {
	return &taskListJSON{w: bufio.NewWriterSize(w, 64<<10)}
}

func (l *taskListJSON) task(t loop.Task) error {
	l.buf = l.buf[:0]
	if l.n == 0 {
		l.buf = append(l.buf, "[\n  "...)
	} else {
		l.buf = append(l.buf, ",\n  "...)
	}
	l.n++
	l.buf = appendTaskJSON(l.buf, t, "  ", &l.times)
	_, err := l.w.Write(l.buf)
	return err
}

func (l *taskListJSON) end() error {
	end := "\n]\n"
	if l.n == 0 {
		end = "[]\n"
	}
	if _, err := l.w.WriteString(end); err != nil {
		return err
	}
	return l.w.Flush()
}

// timeCache remembers the last times jsonTime formatted: the tasks of a
// plan mostly share their creation and update times (an import writes them
// all at once), and formatting them was a fifth of a listing's work.
type timeCache struct {
	t [2]time.Time
	s [2]string
}

func (c *timeCache) format(t time.Time) string {
	for i := range c.t {
		if c.s[i] != "" && c.t[i].Equal(t) {
			return c.s[i]
		}
	}
	c.t[1], c.s[1] = c.t[0], c.s[0]
	c.t[0], c.s[0] = t, jsonTime(t)
	return c.s[0]
}

// appendTaskJSON appends toJSON(t) as encoding/json indents it with two
// spaces at the depth of indent (the object's own line starts there; dst
// already holds that indentation).
func appendTaskJSON(dst []byte, t loop.Task, indent string, times *timeCache) []byte {
	in := indent + "  "
	key := func(k string) {
		dst = append(dst, in...)
		dst = append(dst, '"')
		dst = append(dst, k...)
		dst = append(dst, `": `...)
	}
	str := func(k, v string) {
		key(k)
		dst = appendJSONString(dst, v)
		dst = append(dst, ",\n"...)
	}
	dst = append(dst, "{\n"...)
	str("id", t.ID)
	str("title", t.Title)
	str("description", t.Description)
	str("status", string(t.Status))
	key("priority")
	dst = strconv.AppendInt(dst, int64(t.Priority), 10)
	dst = append(dst, ",\n"...)
	if t.ParentID == "" {
		key("parent_id")
		dst = append(dst, "null,\n"...)
	} else {
		str("parent_id", t.ParentID)
	}
	str("feature", t.Feature)
	str("claimed_by", t.ClaimedBy)
	key("retry_count")
	dst = strconv.AppendInt(dst, int64(t.RetryCount), 10)
	dst = append(dst, ",\n"...)
	key("blocked_by")
	if len(t.BlockedBy) == 0 {
		dst = append(dst, "[],\n"...)
	} else {
		dst = append(dst, "[\n"...)
		for i, b := range t.BlockedBy {
			dst = append(dst, in...)
			dst = append(dst, "  "...)
			dst = appendJSONString(dst, b)
			if i < len(t.BlockedBy)-1 {
				dst = append(dst, ',')
			}
			dst = append(dst, '\n')
		}
		dst = append(dst, in...)
		dst = append(dst, "],\n"...)
	}
	if t.Check != "" {
		str("check", t.Check)
	}
	if t.CheckBy != "" {
		str("check_by", t.CheckBy)
	}
	str("created_at", times.format(t.CreatedAt))
	key("updated_at")
	dst = appendJSONString(dst, times.format(t.UpdatedAt))
	dst = append(dst, '\n')
	dst = append(dst, indent...)
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it with HTML escaping off: quotes, backslashes and control
// characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// taskTable streams the text form of `task list`: one task a line, id,
// status, priority, title, then its parent, blockers and holder when it has
// any; the columns are as wide as text/tabwriter would make them (the
// widest cell and two spaces), sized from the listing's shape before the
// first row instead of by holding every row. Nothing at all for no tasks.
type taskTable struct {
	w      *bufio.Writer
	widths [3]int
	line   []byte
}

func newTaskTable(w io.Writer) *taskTable {
	return &taskTable{w: bufio.NewWriterSize(w, 64<<10)}
}

// shape sizes the columns and writes the header.
func (tt *taskTable) shape(sh dag.ListShape) error {
	if sh.Tasks == 0 {
		return nil
	}
	for i, n := range []int{max(sh.IDWidth, len("ID")), max(sh.StatusWidth, len("STATUS")), max(sh.PriorityWidth, len("PRI"))} {
		tt.widths[i] = n + 2
	}
	return tt.write("ID", "STATUS", "PRI", "TITLE")
}

func (tt *taskTable) task(t loop.Task) error {
	var extra []string
	if t.ParentID != "" {
		extra = append(extra, "parent "+t.ParentID)
	}
	if len(t.BlockedBy) > 0 {
		extra = append(extra, "after "+strings.Join(t.BlockedBy, ","))
	}
	if t.ClaimedBy != "" {
		extra = append(extra, "by "+t.ClaimedBy)
	}
	title := strings.Join(strings.Fields(t.Title), " ")
	if len(extra) > 0 {
		title += "  (" + strings.Join(extra, "; ") + ")"
	}
	return tt.write(t.ID, string(t.Status), strconv.Itoa(t.Priority), title)
}

func (tt *taskTable) write(id, status, pri, title string) error {
	tt.line = tt.line[:0]
	for i, cell := range []string{id, status, pri} {
		tt.line = append(tt.line, cell...)
		for n := utf8.RuneCountInString(cell); n < tt.widths[i]; n++ {
			tt.line = append(tt.line, ' ')
		}
	}
	tt.line = append(tt.line, title...)
	tt.line = append(tt.line, '\n')
	_, err := tt.w.Write(tt.line)
	return err
}

func (tt *taskTable) end() error { return tt.w.Flush() }

// writeTaskText prints a task and its log for people.
// checkText is a task's check as `task show` prints it: the command, and
// who wrote it when an agent did (DESIGN §14: a check an agent wrote is
// marked as such).
func checkText(t loop.Task) string {
	if t.Check == "" || t.CheckBy == "" {
		return t.Check
	}
	return t.Check + "  (written by agent " + t.CheckBy + ")"
}

func writeTaskText(w io.Writer, t loop.Task, logs []loop.LogEntry) error {
	bw := bufio.NewWriter(w)
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(bw, "%-12s %s\n", name+":", value)
		}
	}
	field("id", t.ID)
	field("title", t.Title)
	field("status", string(t.Status))
	field("priority", fmt.Sprint(t.Priority))
	field("parent", t.ParentID)
	field("feature", t.Feature)
	field("blocked by", strings.Join(t.BlockedBy, ", "))
	field("check", checkText(t))
	if t.ClaimedBy != "" {
		claim := t.ClaimedBy
		if !t.ClaimedAt.IsZero() {
			claim += " since " + jsonTime(t.ClaimedAt)
		}
		if !t.LeaseExpiresAt.IsZero() {
			claim += ", lease until " + jsonTime(t.LeaseExpiresAt)
		}
		claim += fmt.Sprintf(" (claim %d", t.Generation)
		if t.ClaimMode != "" {
			claim += ", by the " + string(t.ClaimMode)
		}
		if !t.Holder.IsZero() {
			claim += ", holder " + t.Holder.String()
		}
		field("claimed by", claim+")")
	}
	if t.RetryCount > 0 {
		field("retries", fmt.Sprint(t.RetryCount))
	}
	field("verified", t.VerificationStatus)
	field("created", jsonTime(t.CreatedAt))
	field("updated", jsonTime(t.UpdatedAt))
	if d := strings.TrimSpace(t.Description); d != "" {
		fmt.Fprintf(bw, "\n%s\n", d)
	}
	if len(logs) > 0 {
		fmt.Fprintln(bw, "\nlog:")
		for _, l := range logs {
			actor := l.Actor
			if actor == "" {
				actor = "-"
			}
			fmt.Fprintf(bw, "  %s  %-15s %-16s %s\n", l.At.UTC().Format(time.RFC3339), l.Kind, actor, strings.Join(strings.Fields(l.Message), " "))
		}
	}
	return bw.Flush()
}

// countsJSON is `plan-status --json`.
type countsJSON struct {
	Open    int `json:"open"`
	Active  int `json:"active"`
	Done    int `json:"done"`
	Failed  int `json:"failed"`
	Blocked int `json:"blocked"`
	Total   int `json:"total"`
}

func toCountsJSON(c loop.Counts) countsJSON {
	return countsJSON{Open: c.Open(), Active: c.InProgress, Done: c.Done, Failed: c.Failed, Blocked: c.Blocked, Total: c.Total()}
}
