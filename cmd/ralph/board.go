package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ralph-dev/ralph/claude"
	"github.com/ralph-dev/ralph/loop"
)

// board is the terminal view of a parallel build when stdout is a
// terminal (ARCHITECTURE.md §5): one line per worker — its task,
// how long it has been at it, its agent's latest event — kept at the
// bottom of the screen, and the run's messages (iteration ends, notices,
// waits) scrolling above it, each prefixed with its worker. Piped, the
// build prints every worker's lines prefixed instead (buildView).
type board struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
	// width is the longest line drawn, in runes: one less than the
	// terminal's width, so that no line wraps (erasing counts lines).
	width int

	order []string
	rows  map[string]*boardRow
	drawn int // lines of the board on screen, below the cursor's line start
	// at is when the board was last drawn for an agent event: events
	// redraw it at most every boardEvery.
	at time.Time
}

type boardRow struct {
	task  string
	since time.Time
	event string
}

// boardEvery bounds how often agent events redraw the board.
const boardEvery = 100 * time.Millisecond

func newBoard(w io.Writer, now func() time.Time, getenv func(string) string) *board {
	if now == nil {
		now = time.Now
	}
	cols := termWidth(w)
	if cols <= 0 {
		cols, _ = strconv.Atoi(getenv("COLUMNS"))
	}
	if cols <= 1 {
		cols = 80
	}
	return &board{w: w, now: now, width: cols - 1, rows: map[string]*boardRow{}}
}

// Observe implements loop.Observer; the workers' calls take turns on mu.
func (b *board) Observe(n loop.Note) {
	b.mu.Lock()
	defer b.mu.Unlock()
	row := b.row(n.Worker)
	switch n.Kind {
	case loop.NoteIterationStart:
		row.task = strings.TrimSpace(n.Task.ID + " " + oneLine(n.Task.Title))
		row.since, row.event = n.At, "model "+n.Model
		b.draw()
	case loop.NoteAgentEvent:
		if e := eventLine(n.AgentEvent); e != "" {
			row.event = e
			if now := b.now(); now.Sub(b.at) >= boardEvery {
				b.at = now
				b.draw()
			}
		}
	case loop.NoteIterationEnd:
		if n.Status == loop.IterUsageLimit {
			return
		}
		msg := fmt.Sprintf("iteration %d · %s: %s", n.Iteration, n.Task.ID, n.Status)
		if n.Message != "" {
			msg += ": " + oneLine(n.Message)
		}
		row.task, row.event = "", "idle"
		b.log(n.Worker, msg)
	case loop.NoteWait:
		row.event = "usage limit: waiting until " + n.Until.Format(time.RFC3339)
		b.log(n.Worker, oneLine(n.Message)+" (until "+n.Until.Format(time.RFC3339)+")")
	case loop.NoteWaitAgents:
		row.event = "waiting for other agents"
		b.log(n.Worker, oneLine(n.Message))
	case loop.NoteNotice:
		b.log(n.Worker, "note: "+oneLine(noticeWords(n)))
	}
}

func (b *board) row(worker string) *boardRow {
	if worker == "" {
		worker = "-"
	}
	r := b.rows[worker]
	if r == nil {
		r = &boardRow{event: "starting"}
		b.rows[worker] = r
		b.order = append(b.order, worker)
		slices.SortFunc(b.order, func(x, y string) int {
			if len(x) != len(y) {
				return len(x) - len(y) // w2 before w10
			}
			return strings.Compare(x, y)
		})
	}
	return r
}

// log writes a message above the board.
func (b *board) log(worker, msg string) {
	b.erase()
	// Messages wrap as they must; only the board's own lines are cut.
	fmt.Fprintf(b.w, "[%s] %s\n", claude.EscapeControls(worker), claude.EscapeControls(msg))
	b.draw()
}

// erase clears the board from the screen: up to its first line, then to
// the end of the screen.
func (b *board) erase() {
	if b.drawn > 0 {
		fmt.Fprintf(b.w, "\x1b[%dA\x1b[J", b.drawn)
		b.drawn = 0
	}
}

// draw writes the board anew.
func (b *board) draw() {
	b.erase()
	now := b.now()
	var s strings.Builder
	for _, w := range b.order {
		r := b.rows[w]
		line := w + "  "
		if r.task == "" {
			line += "—"
		} else {
			line += r.task + " · " + now.Sub(r.since).Round(time.Second).String()
		}
		line += " · " + r.event
		// The board writes its own escape sequences: what it shows of
		// tasks and agents is escaped here (terminal.go).
		s.WriteString(cut(claude.EscapeControls(line), b.width))
		s.WriteString("\x1b[K\n")
	}
	io.WriteString(b.w, s.String())
	b.drawn = len(b.order)
}

// cut shortens s to n runes, with an ellipsis, reading no further than
// it must (s may be an agent's whole answer).
func cut(s string, n int) string {
	count := 0
	for i := range s {
		if count == n-1 {
			if _, size := utf8.DecodeRuneInString(s[i:]); i+size == len(s) {
				return s
			}
			return s[:i] + "…"
		}
		count++
	}
	return s
}

// eventLine is an agent event in a few words, "" for events not worth a
// line.
func eventLine(e loop.Event) string {
	switch e.Kind {
	case loop.EventToolUse:
		return "tool: " + e.Tool + " " + oneLine(e.Input)
	case loop.EventText:
		return "says: " + oneLine(cut(e.Text, 200))
	case loop.EventThinking:
		return "thinking"
	case loop.EventToolResult:
		if e.IsError {
			return "tool error: " + oneLine(cut(e.Text, 200))
		}
		return ""
	case loop.EventRateLimit:
		return "rate limit: " + oneLine(e.Text)
	case loop.EventResult:
		return "finished its session"
	}
	return ""
}
