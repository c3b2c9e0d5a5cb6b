package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// screen replays what the board wrote to a terminal that understands
// the three sequences it uses (cursor up N, clear to the end of the screen,
// clear to the end of the line) and returns the lines on the screen.
func screen(out string) []string {
	var lines []string
	cur := 0
	seq := regexp.MustCompile(`^\x1b\[(\d*)([AJK])`)
	line := ""
	for i := 0; i < len(out); {
		if m := seq.FindStringSubmatch(out[i:]); m != nil {
			switch m[2] {
			case "A":
				n := 1
				if m[1] != "" {
					n = atoi(m[1])
				}
				cur -= n
			case "J":
				lines = lines[:cur]
			}
			i += len(m[0])
			continue
		}
		if out[i] == '\n' {
			if cur < len(lines) {
				lines[cur] = line
			} else {
				lines = append(lines, line)
			}
			cur++
			line = ""
		} else {
			line += out[i : i+1]
		}
		i++
	}
	return lines
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestBoardOneLinePerWorker(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	b := newBoard(&out, clock, func(string) string { return "60" })
	start := func(w, id string) {
		b.Observe(loop.Note{Kind: loop.NoteIterationStart, Worker: w, At: now, Model: "sonnet", Task: loop.Task{ID: id, Title: "Task " + id}})
	}
	start("w1", "t-1")
	start("w2", "t-2")
	now = now.Add(3 * time.Second)
	b.Observe(loop.Note{Kind: loop.NoteAgentEvent, Worker: "w2", AgentEvent: loop.Event{Kind: loop.EventToolUse, Tool: "Bash", Input: "go test ./..."}})
	now = now.Add(time.Second)
	b.Observe(loop.Note{Kind: loop.NoteAgentEvent, Worker: "w1", AgentEvent: loop.Event{Kind: loop.EventText, Text: strings.Repeat("long answer ", 1<<20)}})
	b.Observe(loop.Note{Kind: loop.NoteIterationEnd, Worker: "w1", Iteration: 1, Task: loop.Task{ID: "t-1"}, Status: loop.IterDone})
	b.Observe(loop.Note{Kind: loop.NoteNotice, Worker: "w2", Message: "task t-2 landed as abc"})

	got := screen(out.String())
	want := []string{
		"[w1] iteration 1 · t-1: done",
		"[w2] note: task t-2 landed as abc",
		"w1  — · idle",
		"w2  t-2 Task t-2 · 4s · tool: Bash go test ./...",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("screen:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range got[2:] {
		if len([]rune(l)) > 59 {
			t.Errorf("line longer than the board's width: %q", l)
		}
	}
}
