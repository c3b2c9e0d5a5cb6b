package loop_test

import (
	"context"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// A raw stream log the runner could not write to the end (a full disk) is
// said in a notice naming the file and the cause; the session counts as
// it is.
func TestRawLogCutShortIsSaid(t *testing.T) {
	cfg := testConfig(t)
	cfg.RawLogs = true
	cfg.MaxIterations = 1
	rec := &recorder{}
	cfg.Observer = rec
	var logPath string
	runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		logPath = req.LogPath
		res := looptest.Result(done(envOf(req, "RALPH_TASK_ID")))
		res.LogErr = &fs.PathError{Op: "write", Path: req.LogPath, Err: syscall.ENOSPC}
		return res, nil
	})
	store := newStore(t, tasks("a")...)
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	if got := statuses(t, store)["a"]; got != loop.StatusDone {
		t.Errorf("task a is %s, want done", got)
	}
	want := "the raw stream log " + logPath + " could not be written: no space left on device; the rest of the stream is lost from it"
	var notices []string
	for _, n := range rec.kind(loop.NoteNotice) {
		notices = append(notices, n.Message)
	}
	if logPath == "" || !strings.Contains(strings.Join(notices, "\n"), want) {
		t.Errorf("notices %q, want one saying %q", notices, want)
	}
}
