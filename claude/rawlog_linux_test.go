package claude

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sigil"
)

// TestRunLogFull: when the raw stream log cannot be written (a full disk),
// the session goes on and its result is whole, and RunResult.LogErr says
// why the log stopped (the loop turns it into a notice); the agent's
// stderr tail is not mixed with it. /dev/full fails every write; a small
// tmpfs fills up part-way through the stream (root only: it is mounted for
// the test).
func TestRunLogFull(t *testing.T) {
	t.Run("every write fails", func(t *testing.T) {
		req := fakeRequest(t, "echo-text")
		req.Prompt = "all done " + hugeSigil
		req.LogPath = "/dev/full"
		res, err := testRunner(t).Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		checkLogFull(t, res, req)
	})
	t.Run("the disk fills up mid-stream", func(t *testing.T) {
		dir := t.TempDir()
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
			t.Skipf("cannot mount a small tmpfs to fill (needs root): %v", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
		req := fakeRequest(t, "huge-line")
		req.Env = append(req.Env, hugeKindEnv+"="+hugeResult, hugeBytesEnv+"=1048576")
		req.LogPath = filepath.Join(dir, "logs", "iter-1.ndjson")
		res, err := testRunner(t).Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		checkLogFull(t, res, req)
		logged, err := os.ReadFile(req.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(logged) == 0 || len(logged) > 256<<10 || !strings.HasPrefix(string(logged), fakeInit+"\n") {
			t.Errorf("the log holds %d bytes, want the start of the stream, up to the 256 KiB the disk has", len(logged))
		}
	})
}

func checkLogFull(t *testing.T, res loop.RunResult, req loop.RunRequest) {
	t.Helper()
	if res.Class != loop.ClassSuccess || !sigil.Parse(res.Text).TaskDone("t-1") {
		t.Errorf("class %s, %d bytes of text; want a success with its sigil: %s", res.Class, len(res.Text), Describe(res))
	}
	var pe *os.PathError
	if !errors.Is(res.LogErr, syscall.ENOSPC) || !errors.As(res.LogErr, &pe) || pe.Path != req.LogPath {
		t.Errorf("LogErr = %v, want ENOSPC writing %s", res.LogErr, req.LogPath)
	}
	if strings.Contains(res.Stderr, "ralph:") {
		t.Errorf("Stderr holds ralph's own words: %q", res.Stderr)
	}
}
