package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/broker"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// envDial makes the test binary a client: it waits for a line on
// standard input, then asks the broker at $envDial for the plan's counts
// and prints "ok" or the error.
const envDial = "BROKER_TEST_DIAL"

func TestMain(m *testing.M) {
	if path := os.Getenv(envDial); path != "" {
		os.Exit(dialHelper(path))
	}
	os.Exit(m.Run())
}

func dialHelper(path string) int {
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Println("stdin:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := broker.Dial(ctx, path)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer c.Close()
	if _, err := c.Counts(ctx, loop.Scope{}); err != nil {
		fmt.Println("counts:", err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// helper is a client process started through a shell command (sh -c
// script, with the helper's path as $0): script decides whether the
// helper is the process started or one of its children.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   strings.Builder
}

func startHelper(t *testing.T, socket, script string) *helper {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: exec.Command("sh", "-c", script, self)}
	h.cmd.Env = append(os.Environ(), envDial+"="+socket, "GORACE=atexit_sleep_ms=0")
	h.cmd.Stdout = &h.out
	h.cmd.Stderr = &h.out
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stdin.Close()
		h.cmd.Process.Kill()
		h.cmd.Wait()
	})
	return h
}

// connect lets the helper connect and returns what it printed.
func (h *helper) connect(t *testing.T) string {
	t.Helper()
	if _, err := io.WriteString(h.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	h.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the helper did not finish")
	}
	return strings.TrimSpace(h.out.String())
}

// TestPeerCheck: only the admitted process and what it started may use
// the socket; another agent's process, and this process, are refused.
func TestPeerCheck(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the broker checks its peers on Linux only")
	}
	ms := looptest.NewMemStore(nil)
	a := start(t, peek(ms, "agent-a"))
	b := start(t, peek(ms, "agent-b"))

	t.Run("connected before it was admitted", func(t *testing.T) {
		c := dial(t, a.Path())
		errc := make(chan error, 1)
		go func() {
			_, err := c.Counts(t.Context(), loop.Scope{})
			errc <- err
		}()
		time.Sleep(50 * time.Millisecond)
		if err := a.Admit(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Errorf("a connection made just before Admit: %v", err)
		}
	})
	t.Run("the agent itself", func(t *testing.T) {
		h := startHelper(t, a.Path(), `exec "$0"`)
		if err := a.Admit(h.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if got := h.connect(t); got != "ok" {
			t.Errorf("the admitted process: %s", got)
		}
	})
	t.Run("a process the agent started", func(t *testing.T) {
		h := startHelper(t, a.Path(), `"$0"; exit $?`)
		if err := a.Admit(h.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if got := h.connect(t); got != "ok" {
			t.Errorf("the agent's child: %s", got)
		}
	})
	t.Run("another agent", func(t *testing.T) {
		// The helper is agent b's process, and connects to a's socket.
		h := startHelper(t, a.Path(), `exec "$0"`)
		if err := b.Admit(h.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		other := startHelper(t, a.Path(), `exec sleep 60`)
		if err := a.Admit(other.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if got := h.connect(t); !strings.Contains(got, "refused") || !strings.Contains(got, "is not the agent's") {
			t.Errorf("another agent's process on this agent's socket: %s", got)
		}
	})
	t.Run("not the agent", func(t *testing.T) {
		other := startHelper(t, a.Path(), `exec sleep 60`)
		if err := a.Admit(other.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		c := dial(t, a.Path())
		_, err := c.Counts(t.Context(), loop.Scope{})
		wantErr(t, "counts from a process that is not the agent's", err, broker.ErrRefused, "is not the agent's")
	})
	t.Run("the agent ended", func(t *testing.T) {
		h := startHelper(t, a.Path(), `exec sleep 60`)
		if err := a.Admit(h.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		h.cmd.Process.Kill()
		h.cmd.Wait()
		c := dial(t, a.Path())
		_, err := c.Counts(t.Context(), loop.Scope{})
		wantErr(t, "counts after the agent ended", err, broker.ErrRefused, "")
	})
}
