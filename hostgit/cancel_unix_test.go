//go:build unix

package hostgit_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/hostgit"
)

// hangingGit is a git that is git but for the subcommand ralph-hang,
// which runs body (until a signal stops it); body calls ready once it has
// set its signal handling, which says "ready" on a FIFO. It returns the repository, set to run it, and a channel closed
// when it has said "ready".
func hangingGit(t *testing.T, body string) (*hostgit.Repo, <-chan struct{}) {
	t.Helper()
	isolate(t)
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := script(t, filepath.Join(dir, "git"), `ready() { echo ready > '`+fifo+`'; }
for a; do
	if [ "$a" = ralph-hang ]; then
		`+body+`
	fi
done
exec '`+real+`' "$@"`)
	repo, err := hostgit.Find(newRepo(t))
	if err != nil {
		t.Fatal(err)
	}
	repo.Bin = bin
	// Read and write: opening never blocks, and closing it ends the
	// reader if git never writes.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ready := make(chan struct{})
	go func() {
		if _, err := bufio.NewReader(f).ReadString('\n'); err == nil {
			close(ready)
		}
	}()
	return repo, ready
}

// cancelWhen cancels the returned context when ready is closed.
func cancelWhen(t *testing.T, ready <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go func() {
		select {
		case <-ready:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx
}

// A cancelled git is sent SIGTERM, not killed: git removes its lock
// files on it (here, the fake's trap writes a file and exits 143, as git
// does), and Run returns as soon as it has.
func TestCancelSendsSIGTERM(t *testing.T) {
	tmp := t.TempDir()
	done, child := filepath.Join(tmp, "cleaned-up"), filepath.Join(tmp, "child")
	// sh runs a trap only between commands: the hang is a wait for a
	// background job, which the cancel does not reach (git runs in
	// ralph's process group; see the package documentation): the test
	// stops it.
	repo, ready := hangingGit(t, `trap 'echo > '`+done+`'; exit 143' TERM
		sleep 30 >/dev/null 2>&1 &
		echo $! > '`+child+`'
		ready
		wait
		exit 0`)
	t.Cleanup(func() {
		if b, err := os.ReadFile(child); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	ctx := cancelWhen(t, ready)
	start := time.Now()
	_, err := repo.Run(ctx, "", "ralph-hang")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Run returned after %v", d)
	}
	var ge *hostgit.Error
	if !errors.As(err, &ge) || ge.ExitCode() != 143 {
		t.Fatalf("Run = %v; want an *Error with exit code 143 (git's own exit on SIGTERM)", err)
	}
	if !exists(done) {
		t.Error("git was stopped before its SIGTERM handler ran")
	}
}

// A git that does not exit on SIGTERM is killed WaitDelay later. Command
// sets WaitDelay (hostgit.WaitDelay, 5 s); the test shortens it.
func TestCancelKillsAfterWaitDelay(t *testing.T) {
	repo, ready := hangingGit(t, `trap '' TERM
		ready
		exec sleep 30`)
	ctx := cancelWhen(t, ready)
	cmd, err := repo.Command(ctx, "", "ralph-hang")
	if err != nil {
		t.Fatal(err)
	}
	if cmd.WaitDelay != hostgit.WaitDelay {
		t.Errorf("WaitDelay %v, want %v", cmd.WaitDelay, hostgit.WaitDelay)
	}
	const delay = 300 * time.Millisecond
	cmd.WaitDelay = delay
	var out strings.Builder
	cmd.Stdout = &out
	start := time.Now()
	err = cmd.Run()
	d := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Run = %v; want an *exec.ExitError", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("git ended with %v; want killed by SIGKILL after ignoring SIGTERM", ee)
	}
	if d < delay || d > delay+3*time.Second {
		t.Errorf("Run returned after %v; want WaitDelay (%v) after the cancel", d, delay)
	}
}
