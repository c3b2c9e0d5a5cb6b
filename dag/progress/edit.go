package progress

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// KeepAttempts is how many Recent Attempts blocks ralph keeps: adding one
// drops the oldest (topmost) past this number.
const KeepAttempts = 5

// IterationRow is one row of the Iteration Log table.
type IterationRow struct {
	Iteration      int
	Started        time.Time
	Duration       time.Duration
	TasksCompleted int
	Notes          string
}

// logHeader is the Iteration Log table ralph creates when there is none.
var logHeader = []string{
	"| Iteration | Started | Duration | Tasks Completed | Notes |",
	"|-----------|---------|----------|-----------------|-------|",
}

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// apply applies non-overlapping edits to src and returns the result, built
// in one allocation of its exact size. An insertion at the start of a
// deletion goes before it.
func apply(src string, edits []edit) string {
	slices.SortFunc(edits, func(a, b edit) int { return cmp.Or(a.start-b.start, a.end-b.end) })
	n := len(src)
	for _, e := range edits {
		n += len(e.text) - (e.end - e.start)
	}
	var b strings.Builder
	b.Grow(n)
	at := 0
	for _, e := range edits {
		b.WriteString(src[at:e.start])
		b.WriteString(e.text)
		at = e.end
	}
	b.WriteString(src[at:])
	return b.String()
}

func (d *Doc) nl() string {
	if d.crlf {
		return "\r\n"
	}
	return "\n"
}

// withLines renders lines with the document's line ending, each ended.
func (d *Doc) withLines(lines ...string) string {
	return strings.Join(lines, d.nl()) + d.nl()
}

// endOf returns the offset just past line i with its line ending, adding
// one when line i is the last line and has none. The returned prefix must
// be put before any inserted text.
func (d *Doc) endOf(i int) (int, string) {
	if next, end := d.next(i), d.end(i); next != end {
		return next, ""
	}
	return d.end(i), d.nl()
}

// lastContent returns the index of the last non-blank line in [from, to),
// or from-1 when all are blank.
func (d *Doc) lastContent(from, to int) int {
	for i := to - 1; i >= from; i-- {
		if strings.TrimSpace(d.text(i)) != "" {
			return i
		}
	}
	return from - 1
}

// tick returns the source with the box of task id checked. It changes the
// one byte between the brackets.
func (d *Doc) tick(id string) (string, error) {
	it, ok := d.item(id)
	if !ok || it.Phase {
		return "", fmt.Errorf("progress: task %s: no box with that id: %w", id, loop.ErrNotFound)
	}
	if it.Checked {
		return d.src, nil
	}
	return apply(d.src, []edit{{it.box, it.box + 1, "x"}}), nil
}

// ticked turns d, in place, into the parse of out, which tick(id) returned:
// one byte changed and nothing moved, so only the box's Checked changes
// (the fuzz test checks this against parsing out).
func (d *Doc) ticked(id, out string) {
	for i := range d.Items {
		if d.Items[i].ID == id && !d.Items[i].Phase {
			d.Items[i].Checked = true
		}
	}
	d.src = out
}

// appendIteration returns the source with row appended to the Iteration
// Log table, creating the table, or the section at the end of the file,
// when missing.
func (d *Doc) appendIteration(r IterationRow) string {
	return apply(d.src, d.appendIterationEdits(r))
}

// logIteration is appendIteration and trimAttempts(keep) in one edit, as
// AppendIteration writes them.
func (d *Doc) logIteration(r IterationRow, keep int) string {
	return apply(d.src, append(d.trimEdits(keep), d.appendIterationEdits(r)...))
}

func (d *Doc) appendIterationEdits(r IterationRow) []edit {
	row := formatRow(r)
	sp, ok := d.sections[SectionLog]
	if !ok {
		at, pre := len(d.src), ""
		if n := len(d.lines); n > 0 {
			at, pre = d.endOf(n - 1)
			if strings.TrimSpace(d.text(n-1)) != "" {
				pre += d.nl()
			}
		}
		return []edit{{at, at, pre + d.withLines("## "+string(SectionLog), logHeader[0], logHeader[1], row)}}
	}
	if d.logLast >= 0 {
		at, pre := d.endOf(d.logLast)
		return []edit{{at, at, pre + d.withLines(row)}}
	}
	last := d.lastContent(sp.from, sp.to)
	at, pre := d.endOf(last)
	if last > sp.from {
		pre += d.nl()
	}
	return []edit{{at, at, pre + d.withLines(logHeader[0], logHeader[1], row)}}
}

// formatRow renders an Iteration Log row. Notes are put on one line and
// their pipes escaped.
func formatRow(r IterationRow) string {
	notes := strings.Join(strings.Fields(r.Notes), " ")
	notes = strings.ReplaceAll(notes, "|", `\|`)
	started := ""
	if !r.Started.IsZero() {
		started = r.Started.Format(time.RFC3339)
	}
	return fmt.Sprintf("| %d | %s | %s | %d | %s |", r.Iteration, started, formatDuration(r.Duration), r.TasksCompleted, notes)
}

// formatDuration rounds to the second ("1m23s"), or to the millisecond
// under a second ("850ms").
func formatDuration(d time.Duration) string {
	if d > -time.Second && d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// addAttempt returns the source with a appended as the last block of
// Recent Attempts and the oldest blocks dropped so that at most keep
// remain. The section is created (before Iteration Log, else at the end)
// when missing.
func (d *Doc) addAttempt(a Attempt, keep int) string {
	block := d.formatAttempt(a)
	sp, ok := d.sections[SectionAttempts]
	if !ok {
		text := d.withLines("## "+string(SectionAttempts)) + block
		if lg, ok := d.sections[SectionLog]; ok {
			at, pre := d.lines[lg.from].start, ""
			if lg.from > 0 && strings.TrimSpace(d.text(lg.from-1)) != "" {
				pre = d.nl()
			}
			return apply(d.src, []edit{{at, at, pre + text + d.nl()}})
		}
		at, pre := len(d.src), ""
		if n := len(d.lines); n > 0 {
			at, pre = d.endOf(n - 1)
			if strings.TrimSpace(d.text(n-1)) != "" {
				pre += d.nl()
			}
		}
		return apply(d.src, []edit{{at, at, pre + text}})
	}
	last := d.lastContent(sp.from+1, sp.to)
	if last < sp.from+1 {
		last = sp.from
	}
	at, pre := d.endOf(last)
	if last > sp.from {
		pre += d.nl()
	}
	edits := []edit{{at, at, pre + block}}
	if drop := len(d.attempts) + 1 - keep; drop > 0 {
		for _, b := range d.attempts[:min(drop, len(d.attempts))] {
			edits = append(edits, d.removeLines(b))
		}
	}
	return apply(d.src, edits)
}

// trimEdits are the edits dropping the oldest attempt blocks so that at
// most keep remain.
func (d *Doc) trimEdits(keep int) []edit {
	var edits []edit
	for _, b := range d.attempts[:max(len(d.attempts)-keep, 0)] {
		edits = append(edits, d.removeLines(b))
	}
	return edits
}

// removeLines is the edit deleting lines [s.from, s.to). When that runs to
// the end of a file without a final newline, the line ending before it
// goes too.
func (d *Doc) removeLines(s span) edit {
	end := len(d.src)
	if s.to < len(d.lines) {
		end = d.lines[s.to].start
	}
	return edit{d.lines[s.from].start, end, ""}
}

// formatAttempt renders an attempt block. Values on several lines continue
// indented under their bullet.
func (d *Doc) formatAttempt(a Attempt) string {
	lines := []string{"### Iteration " + strconv.Itoa(a.Iteration)}
	for _, f := range []struct{ k, v string }{{"Tried", a.Tried}, {"Result", a.Result}, {"Next", a.Next}} {
		var vs []string
		for _, v := range strings.Split(strings.TrimSpace(f.v), "\n") {
			if v = strings.TrimSpace(v); v != "" {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			lines = append(lines, "- "+f.k+":")
			continue
		}
		lines = append(lines, "- "+f.k+": "+vs[0])
		for _, v := range vs[1:] {
			lines = append(lines, "  "+v)
		}
	}
	return d.withLines(lines...)
}
