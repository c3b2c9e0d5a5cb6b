package progress

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
	"github.com/ralph-dev/ralph/safefile"
)

var start = time.Date(2026, 1, 29, 10, 0, 0, 0, time.UTC)

const twoPhases = `# Progress: Two phases

Intro the user wrote.

## Status
In Progress

## Tasks
### Phase 1: Setup
- [x] Create the module
- [ ] Add a Makefile
  with test and lint targets
- [ ] Write the README

### Phase 2: Features
- [ ] Add a task
- [ ] List tasks

## Completed This Iteration

## Recent Attempts

## Iteration Log
| Iteration | Started | Duration | Tasks Completed | Notes |
|-----------|---------|----------|-----------------|-------|

## Notes
The user's own section.
`

// openStore writes doc to a fresh file and opens a Store over it with a
// fake clock.
func openStore(t *testing.T, doc string) (*Store, *looptest.Clock) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "progress.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := looptest.NewClock(start)
	s, err := Open(path, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, clock
}

func (s *Store) content(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (s *Store) edit(t *testing.T, old, new string) {
	t.Helper()
	c := s.content(t)
	if !strings.Contains(c, old) {
		t.Fatalf("the file does not hold %q", old)
	}
	if err := os.WriteFile(s.path, []byte(strings.Replace(c, old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ids(tasks []loop.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "missing.md"), Options{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing file: %v, want fs.ErrNotExist", err)
	}
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("# Project\n\n- [ ] a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(readme, Options{})
	if !errors.Is(err, ErrNotProgressFile) {
		t.Errorf("Open of a README: %v, want ErrNotProgressFile", err)
	}
	want := readme + `: progress: line 1: want "# Progress: <name>" as the first line, got "# Project"`
	if err != nil && err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// TestStoreRun drives a store the way the loop does and checks the file
// after each step.
func TestStoreRun(t *testing.T) {
	s, clock := openStore(t, twoPhases)
	ctx := t.Context()

	ready, err := s.Ready(ctx, loop.Scope{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"add-a-makefile", "write-the-readme", "add-a-task", "list-tasks"}, ids(ready)); diff != "" {
		t.Errorf("Ready (-want +got):\n%s", diff)
	}
	got, err := s.Get(ctx, "add-a-makefile")
	if err != nil {
		t.Fatal(err)
	}
	want := loop.Task{ID: "add-a-makefile", Title: "Add a Makefile", Description: "with test and lint targets",
		Status: loop.StatusPending, Priority: 2, ParentID: "phase-1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}

	var done []string
	for i := 1; ; i++ {
		before := s.content(t)
		task, err := s.Claim(ctx, loop.ClaimParams{Agent: "agent-1"})
		if errors.Is(err, loop.ErrNoReadyTask) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if before != s.content(t) {
			t.Fatal("Claim wrote the file")
		}
		clock.Advance(time.Minute)
		if err := s.Complete(ctx, loop.MoveParams{TaskID: task.ID, Message: "did " + task.ID}); err != nil {
			t.Fatal(err)
		}
		after := s.content(t)
		if p, e := changedRegion([]byte(before), []byte(after)); e-p != 1 || after[p] != 'x' {
			t.Fatalf("Complete(%s) changed bytes [%d,%d), want one box", task.ID, p, e)
		}
		if err := s.AppendIteration(ctx, IterationRow{Iteration: i, Started: clock.Now(), Duration: time.Minute, TasksCompleted: 1, Notes: task.ID}); err != nil {
			t.Fatal(err)
		}
		done = append(done, task.ID)
	}
	if diff := cmp.Diff([]string{"add-a-makefile", "write-the-readme", "add-a-task", "list-tasks"}, done); diff != "" {
		t.Errorf("completion order (-want +got):\n%s", diff)
	}
	fin, err := s.Done(ctx)
	if err != nil || !fin {
		t.Errorf("Done = %v, %v; want true", fin, err)
	}
	counts, err := s.Counts(ctx, loop.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(loop.Counts{Done: 5}, counts); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	for _, id := range []string{"phase-1", "phase-2"} {
		if p, _ := s.Get(ctx, id); p.Status != loop.StatusDone {
			t.Errorf("%s is %s, want done", id, p.Status)
		}
	}
	golden(t, filepath.Join("testdata", "run.golden"), []byte(s.content(t)))
}

// TestStoreRereads checks that edits made to the file between calls are
// seen, and that ids follow the task, not its position.
func TestStoreRereads(t *testing.T) {
	ctx := t.Context()
	t.Run("user ticks a box", func(t *testing.T) {
		s, _ := openStore(t, twoPhases)
		s.edit(t, "- [ ] Add a Makefile", "- [x] Add a Makefile")
		task, err := s.Claim(ctx, loop.ClaimParams{Agent: "a"})
		if err != nil || task.ID != "write-the-readme" {
			t.Errorf("Claim = %s, %v; want write-the-readme", task.ID, err)
		}
	})
	t.Run("task inserted above the claimed one", func(t *testing.T) {
		s, _ := openStore(t, twoPhases)
		if _, err := s.Claim(ctx, loop.ClaimParams{TaskID: "write-the-readme", Agent: "a"}); err != nil {
			t.Fatal(err)
		}
		s.edit(t, "- [ ] Write the README", "- [ ] Add a LICENSE\n- [ ] Write the README")
		if err := s.Complete(ctx, loop.MoveParams{TaskID: "write-the-readme", Message: ""}); err != nil {
			t.Fatal(err)
		}
		c := s.content(t)
		if !strings.Contains(c, "- [ ] Add a LICENSE\n- [x] Write the README\n") {
			t.Errorf("the wrong box was ticked:\n%s", c)
		}
	})
	t.Run("claimed task reworded", func(t *testing.T) {
		s, _ := openStore(t, twoPhases)
		if _, err := s.Claim(ctx, loop.ClaimParams{TaskID: "write-the-readme", Agent: "a"}); err != nil {
			t.Fatal(err)
		}
		s.edit(t, "Write the README", "Write the README and a guide")
		before := s.content(t)
		err := s.Complete(ctx, loop.MoveParams{TaskID: "write-the-readme", Message: ""})
		if !errors.Is(err, loop.ErrNotFound) {
			t.Errorf("Complete of a reworded task: %v, want ErrNotFound", err)
		}
		if s.content(t) != before {
			t.Error("a failed Complete wrote the file")
		}
	})
	t.Run("agent ticked its own box", func(t *testing.T) {
		s, _ := openStore(t, twoPhases)
		if _, err := s.Claim(ctx, loop.ClaimParams{Agent: "a"}); err != nil {
			t.Fatal(err)
		}
		s.edit(t, "- [ ] Add a Makefile", "- [x] Add a Makefile")
		before := s.content(t)
		// Ticked, the box is still the loop's claim until it completes it
		// (after verification and gates), and it says the agent marked it.
		active, err := s.Active(ctx, loop.Scope{})
		if err != nil || len(active) != 1 {
			t.Errorf("Active = %v, %v; want the ticked box, still claimed", ids(active), err)
		}
		if marked, err := s.MarkedDone(ctx, "add-a-makefile"); !marked || err != nil {
			t.Errorf("MarkedDone = %v, %v; want true", marked, err)
		}
		if err := s.Complete(ctx, loop.MoveParams{TaskID: "add-a-makefile", Message: "by the agent"}); err != nil {
			t.Errorf("Complete after the agent ticked the box: %v", err)
		}
		if s.content(t) != before {
			t.Error("Complete rewrote a box that was already ticked")
		}
		err = s.Complete(ctx, loop.MoveParams{TaskID: "add-a-makefile", Message: ""})
		var te *loop.TransitionError
		if !errors.As(err, &te) || te.From != loop.StatusDone {
			t.Errorf("second Complete: %v, want a TransitionError from done", err)
		}
	})
	t.Run("file broken between iterations", func(t *testing.T) {
		s, _ := openStore(t, twoPhases)
		s.edit(t, "# Progress: Two phases", "# Notes")
		_, err := s.Ready(ctx, loop.Scope{}, 0)
		if !errors.Is(err, ErrNotProgressFile) || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("Ready over a broken file: %v, want ErrNotProgressFile naming line 1", err)
		}
	})
}

func TestStoreFail(t *testing.T) {
	s, clock := openStore(t, twoPhases)
	ctx := t.Context()
	if err := s.AppendIteration(ctx, IterationRow{Iteration: 1, Started: start, Duration: time.Second}); err != nil {
		t.Fatal(err)
	}
	task, err := s.Claim(ctx, loop.ClaimParams{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := s.Fail(ctx, loop.MoveParams{TaskID: task.ID, Message: "make is not installed"}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Doc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantAttempts := []Attempt{{Iteration: 2, Tried: "Add a Makefile (add-a-makefile)", Result: "failed: make is not installed",
		Next: "not retried in this run; fix the cause or split the task, then run again"}}
	if diff := cmp.Diff(wantAttempts, d.Attempts); diff != "" {
		t.Errorf("Recent Attempts (-want +got):\n%s", diff)
	}
	// The box stays unticked, its phase fails, and phase 2 goes on.
	ready, err := s.Ready(ctx, loop.Scope{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"add-a-task", "list-tasks"}, ids(ready)); diff != "" {
		t.Errorf("Ready after a failure (-want +got):\n%s", diff)
	}
	counts, _ := s.Counts(ctx, loop.Scope{})
	if diff := cmp.Diff(loop.Counts{Pending: 3, Done: 1, Failed: 1}, counts); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	if fin, _ := s.Done(ctx); fin {
		t.Error("Done with an unticked failed box")
	}
	_, err = s.Claim(ctx, loop.ClaimParams{TaskID: "write-the-readme", Agent: "a"})
	if !errors.Is(err, loop.ErrNotReady) || !strings.Contains(err.Error(), "parent phase-1 is failed") {
		t.Errorf("Claim under a failed phase: %v", err)
	}
	// Retrying the phase offers its boxes again; the failed box needs its
	// own retry.
	if err := s.Retry(ctx, loop.MoveParams{TaskID: "phase-1", Message: "fixed make"}); err != nil {
		t.Fatal(err)
	}
	ready, _ = s.Ready(ctx, loop.Scope{TaskID: "phase-1"}, 0)
	if diff := cmp.Diff([]string{"write-the-readme"}, ids(ready)); diff != "" {
		t.Errorf("Ready in phase 1 after retrying it (-want +got):\n%s", diff)
	}
	if err := s.Retry(ctx, loop.MoveParams{TaskID: "add-a-makefile", Message: "try again"}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, "add-a-makefile")
	if got.Status != loop.StatusPending || got.RetryCount != 1 {
		t.Errorf("after Retry: %s with RetryCount %d, want pending with 1", got.Status, got.RetryCount)
	}
}

func TestStoreScopeErrors(t *testing.T) {
	s, _ := openStore(t, twoPhases)
	ctx := t.Context()
	if _, err := s.Ready(ctx, loop.Scope{Feature: "auth"}, 0); !errors.Is(err, ErrFeatures) {
		t.Errorf("Ready with a feature scope: %v, want ErrFeatures", err)
	}
	if _, err := s.Counts(ctx, loop.Scope{TaskID: "nope"}); !errors.Is(err, loop.ErrNotFound) {
		t.Errorf("Counts with an unknown task scope: %v, want ErrNotFound", err)
	}
	if _, err := s.Claim(ctx, loop.ClaimParams{TaskID: "phase-2", Agent: "a"}); !errors.Is(err, loop.ErrNotReady) {
		t.Errorf("Claim of a phase: %v, want ErrNotReady", err)
	}
}

func TestDone(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want bool
	}{
		{"open boxes", twoPhases, false},
		{"all ticked", strings.ReplaceAll(twoPhases, "- [ ]", "- [x]"), true},
		{"RALPH_DONE", strings.Replace(twoPhases, "In Progress", "Finished\nRALPH_DONE", 1), true},
		{"RALPH_DONE in a task", strings.Replace(twoPhases, "List tasks", "List tasks, then RALPH_DONE", 1), false},
		{"no boxes", "# Progress: empty\n## Tasks\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t, tt.doc)
			got, err := s.Done(t.Context())
			if err != nil || got != tt.want {
				t.Errorf("Done = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestAttemptsTrimmed adds attempts and log rows through the store: the
// last five attempts stay, oldest first, and a log row trims attempts the
// agent added itself.
func TestAttemptsTrimmed(t *testing.T) {
	s, _ := openStore(t, twoPhases)
	ctx := t.Context()
	for i := 1; i <= 7; i++ {
		if err := s.AddAttempt(ctx, Attempt{Iteration: i, Tried: "t", Result: "r", Next: "n"}); err != nil {
			t.Fatal(err)
		}
	}
	iterations := func() []int {
		t.Helper()
		d, err := s.Doc(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, a := range d.Attempts {
			out = append(out, a.Iteration)
		}
		return out
	}
	if diff := cmp.Diff([]int{3, 4, 5, 6, 7}, iterations()); diff != "" {
		t.Errorf("attempts after 7 adds (-want +got):\n%s", diff)
	}
	// The agent appends two of its own; the next log row trims them.
	s.edit(t, "## Iteration Log", "### Iteration 8\n- Tried: a\n\n### Iteration 9\n- Tried: b\n\n## Iteration Log")
	if err := s.AppendIteration(ctx, IterationRow{Iteration: 9, Started: start, Duration: 61 * time.Second, TasksCompleted: 2, Notes: "two"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{5, 6, 7, 8, 9}, iterations()); diff != "" {
		t.Errorf("attempts after a log row (-want +got):\n%s", diff)
	}
	d, _ := s.Doc(ctx)
	wantLog := []LogRow{{Line: d.Log[0].Line, Cells: []string{"9", "2026-01-29T10:00:00Z", "1m1s", "2", "two"}}}
	if diff := cmp.Diff(wantLog, d.Log); diff != "" {
		t.Errorf("Iteration Log (-want +got):\n%s", diff)
	}
	if !strings.HasSuffix(s.content(t), "## Notes\nThe user's own section.\n") {
		t.Errorf("the user's section moved or changed:\n%s", s.content(t))
	}
	before := s.content(t)
	for _, err := range []error{
		s.AddAttempt(ctx, Attempt{Iteration: 0}),
		s.AppendIteration(ctx, IterationRow{Iteration: -1}),
	} {
		if err == nil {
			t.Error("a non-positive iteration was accepted")
		}
	}
	if s.content(t) != before {
		t.Error("a refused write changed the file")
	}
}

func TestReplaceDocument(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		wantErr error
		errText string
	}{
		{name: "ticks and a new task", text: strings.Replace(strings.Replace(twoPhases, "- [ ] Add a Makefile", "- [x] Add a Makefile", 1),
			"- [ ] List tasks", "- [ ] List tasks\n- [ ] Delete a task", 1)},
		{name: "RALPH_DONE, no final newline", text: strings.TrimSuffix(strings.Replace(twoPhases, "In Progress", "RALPH_DONE", 1), "\n")},
		{name: "truncated", text: twoPhases[:strings.Index(twoPhases, "### Phase 2")], wantErr: ErrLostTasks,
			errText: `progress: the new document drops tasks: "Add a task" (line 16), "List tasks" (line 17)`},
		{name: "reworded", text: strings.Replace(twoPhases, "Write the README", "Write docs", 1), wantErr: ErrLostTasks,
			errText: `progress: the new document drops tasks: "Write the README" (line 13)`},
		{name: "prose", text: "I updated the file as asked.", wantErr: ErrNotProgressFile,
			errText: `progress: replacement document: progress: line 1: want "# Progress: <name>" as the first line, got "I updated the file as asked."`},
		{name: "empty", text: "", wantErr: ErrNotProgressFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t, twoPhases)
			err := s.ReplaceDocument(t.Context(), tt.text)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				want := tt.text
				if !strings.HasSuffix(want, "\n") {
					want += "\n"
				}
				if diff := cmp.Diff(want, s.content(t)); diff != "" {
					t.Errorf("file (-want +got):\n%s", diff)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if tt.errText != "" && err.Error() != tt.errText {
				t.Errorf("error = %q\nwant    %q", err, tt.errText)
			}
			if s.content(t) != twoPhases {
				t.Error("a refused replacement changed the file")
			}
		})
	}
}

// TestAtomicWrite simulates a crash between writing the temporary file and
// renaming it: the original must be untouched, no partial file may replace
// it, and the store's state must be as before the call.
func TestAtomicWrite(t *testing.T) {
	s, _ := openStore(t, twoPhases)
	ctx := t.Context()
	if err := os.Chmod(s.path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, loop.ClaimParams{Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	var tmpContent string
	crash := errors.New("simulated crash before rename")
	s.rename = func(d *safefile.Dir, oldname, newname string) error {
		b, err := os.ReadFile(filepath.Join(d.Path(), oldname))
		if err != nil {
			return err
		}
		tmpContent = string(b)
		if filepath.Dir(oldname) != filepath.Dir(newname) || d.Path() != filepath.Dir(s.path) {
			t.Errorf("temporary file %s is not in the directory of %s", oldname, newname)
		}
		return crash
	}
	before, err := os.Stat(s.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Complete", func() error { return s.Complete(ctx, loop.MoveParams{TaskID: "add-a-makefile", Message: "done"}) }},
		{"Fail", func() error { return s.Fail(ctx, loop.MoveParams{TaskID: "add-a-makefile", Message: "boom"}) }},
		{"AppendIteration", func() error { return s.AppendIteration(ctx, IterationRow{Iteration: 1}) }},
		{"AddAttempt", func() error { return s.AddAttempt(ctx, Attempt{Iteration: 1}) }},
		{"ReplaceDocument", func() error {
			return s.ReplaceDocument(ctx, strings.Replace(twoPhases, "In Progress", "RALPH_DONE", 1))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmpContent = ""
			err := c.call()
			if !errors.Is(err, crash) {
				t.Fatalf("error = %v, want the simulated crash", err)
			}
			if tmpContent == "" || tmpContent == twoPhases {
				t.Errorf("the temporary file did not hold the new content before the rename: %q", tmpContent)
			}
			if got := s.content(t); got != twoPhases {
				t.Errorf("the original changed:\n%s", got)
			}
			after, err := os.Stat(s.path)
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(before, after) || after.Mode() != before.Mode() {
				t.Error("the original file was replaced or its mode changed")
			}
			entries, _ := os.ReadDir(filepath.Dir(s.path))
			if len(entries) != 1 {
				t.Errorf("files left beside the original: %v", entries)
			}
			if task, _ := s.Get(ctx, "add-a-makefile"); task.Status != loop.StatusInProgress || task.ClaimedBy != "a" {
				t.Errorf("the task is %s held by %q, want still in_progress by a", task.Status, task.ClaimedBy)
			}
		})
	}

	// With renames working again, the write goes through and keeps the mode.
	s.rename = (*safefile.Dir).Rename
	if err := s.Complete(ctx, loop.MoveParams{TaskID: "add-a-makefile", Message: "done"}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after a write = %v, want 0600", fi.Mode().Perm())
	}
	if !strings.Contains(s.content(t), "- [x] Add a Makefile") {
		t.Error("the box was not ticked")
	}
}

// A progress file that is a link is refused, at Open and at a write after
// a link was planted: ralph follows no link an agent could have planted
// (ARCHITECTURE.md §7), and the link's target is never written.
func TestSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "bashrc")
	if err := os.WriteFile(outside, []byte(twoPhases), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "progress.md")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link, Options{}); !errors.Is(err, safefile.ErrLink) || !strings.Contains(err.Error(), "give the file itself") {
		t.Errorf("Open of a link: %v, want a refused link", err)
	}

	// A link planted under a running store (the file replaced, or a
	// directory on the way, with Root the project).
	for _, at := range []string{"file", "directory"} {
		t.Run(at, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, "docs", "progress.md")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(twoPhases), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			switch at {
			case "file":
				os.Remove(path)
				if err := os.Symlink(outside, path); err != nil {
					t.Fatal(err)
				}
			case "directory":
				elsewhere := t.TempDir()
				if err := os.Symlink(outside, filepath.Join(elsewhere, "progress.md")); err != nil {
					t.Fatal(err)
				}
				os.Rename(filepath.Join(root, "docs"), filepath.Join(root, "docs.old"))
				if err := os.Symlink(elsewhere, filepath.Join(root, "docs")); err != nil {
					t.Fatal(err)
				}
			}
			err = s.AddAttempt(t.Context(), Attempt{Iteration: 1, Tried: "x"})
			if !errors.Is(err, safefile.ErrLink) {
				t.Errorf("a write through a planted link: %v, want a refused link", err)
			}
			if b, _ := os.ReadFile(outside); string(b) != twoPhases {
				t.Errorf("the file outside changed:\n%s", b)
			}
		})
	}
}

func TestCancelledWritesNothing(t *testing.T) {
	s, _ := openStore(t, twoPhases)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, err := range []error{
		s.AppendIteration(ctx, IterationRow{Iteration: 1}),
		s.AddAttempt(ctx, Attempt{Iteration: 1}),
		s.ReplaceDocument(ctx, twoPhases),
		func() error { _, err := s.Done(ctx); return err }(),
	} {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
	}
	if s.content(t) != twoPhases {
		t.Error("a cancelled call changed the file")
	}
}

func BenchmarkReady(b *testing.B) {
	path := filepath.Join(b.TempDir(), "progress.md")
	if err := os.WriteFile(path, bigFile(50, 20), 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Ready(b.Context(), loop.Scope{}, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendIteration(b *testing.B) {
	path := filepath.Join(b.TempDir(), "progress.md")
	if err := os.WriteFile(path, bigFile(50, 20), 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		if err := s.AppendIteration(b.Context(), IterationRow{Iteration: i, Started: start, Duration: time.Second}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWriteSeesConcurrentEdit edits the file between the store's read and
// its write: the write is redone on the new content, so the edit is kept;
// an editor that never stops gets ErrConflict and the file is left alone.
func TestWriteSeesConcurrentEdit(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, twoPhases)
	if _, err := s.Claim(ctx, loop.ClaimParams{Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	edits := 0
	s.beforeCheck = func() {
		if edits == 0 {
			s.edit(t, "The user's own section.", "The user's own section, edited during the write.")
		}
		edits++
	}
	if err := s.Complete(ctx, loop.MoveParams{TaskID: "add-a-makefile", Message: ""}); err != nil {
		t.Fatal(err)
	}
	c := s.content(t)
	if !strings.Contains(c, "- [x] Add a Makefile") || !strings.Contains(c, "edited during the write.") {
		t.Errorf("the tick or the concurrent edit was lost:\n%s", c)
	}

	n := 0
	s.beforeCheck = func() {
		n++
		s.edit(t, "Intro the user wrote", "Intro the user wrote"+strings.Repeat("!", n))
	}
	err := s.AddAttempt(ctx, Attempt{Iteration: 1})
	if !errors.Is(err, ErrConflict) {
		t.Errorf("error = %v, want ErrConflict", err)
	}
	if d, _ := s.Doc(ctx); len(d.Attempts) != 0 {
		t.Error("the attempt was written despite the conflict")
	}
}

// TestCompleteAfterConcurrentRemoval removes the claimed box while Complete
// writes: the redone write finds no box and reports ErrNotFound.
func TestCompleteAfterConcurrentRemoval(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, twoPhases)
	if _, err := s.Claim(ctx, loop.ClaimParams{Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	s.beforeCheck = func() {
		s.beforeCheck = nil
		s.edit(t, "- [ ] Add a Makefile\n  with test and lint targets\n", "")
	}
	err := s.Complete(ctx, loop.MoveParams{TaskID: "add-a-makefile", Message: ""})
	if !errors.Is(err, loop.ErrNotFound) {
		t.Errorf("error = %v, want ErrNotFound", err)
	}
	want := strings.Replace(twoPhases, "- [ ] Add a Makefile\n  with test and lint targets\n", "", 1)
	if diff := cmp.Diff(want, s.content(t)); diff != "" {
		t.Errorf("file (-want +got):\n%s", diff)
	}
}
