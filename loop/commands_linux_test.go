package loop_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/agentproc/agentproctest"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// grandchildren are commands that leave a process of their own running
// when their shell is stopped: in the shell's process group (a job the
// shell waits for, a nohup'd one), or out of it (setsid), which only a
// CommandRunner that reaps the command's descendants (agentproc.Commands)
// reaches. Each process is marked by an environment entry (%[1]s) and
// the shell says "ready" on the FIFO %[2]s once it has started it.
var grandchildren = []struct {
	name    string
	command string
	setsid  bool
}{
	{name: "a background job", command: `%[1]s sleep 30 & echo ready > %[2]s; wait`},
	{name: "nohup", command: `%[1]s nohup sleep 30 >/dev/null 2>&1 & echo ready > %[2]s; wait`},
	{name: "setsid", command: `%[1]s setsid sleep 30 & echo ready > %[2]s; wait`, setsid: true},
}

// commandRunners are the CommandRunners a gate or a setup runs through:
// a Config's nil (HostCommands) and the CLI's, agentproc.Commands on the
// host.
var commandRunners = []struct {
	name     string
	commands loop.CommandRunner
	reaps    bool // reaps a process that left the group
}{
	{name: "HostCommands", commands: nil},
	{name: "agentproc.Commands", commands: &agentproc.Commands{}, reaps: true},
}

// readyFIFO makes a FIFO and returns its path and a channel closed when a
// command writes a line to it. The FIFO is opened for reading and writing
// at once so that opening it never blocks and the test's cleanup
// unblocks the reader when nothing ever writes.
func readyFIFO(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		if _, err := bufio.NewReader(f).ReadString('\n'); err == nil {
			close(ready)
		}
	}()
	t.Cleanup(func() { f.Close() })
	return path, ready
}

// marker returns an environment entry no other process has.
func marker() string {
	return "RALPH_TEST_GRANDCHILD=" + rand.Text()
}

// A run cancelled while its test gate runs returns at once and leaves
// none of the processes the gate started, in its process group or out of
// it (with a CommandRunner that reaps those).
func TestGateCancelLeavesNoProcess(t *testing.T) {
	for _, cr := range commandRunners {
		for _, gc := range grandchildren {
			if gc.setsid && !cr.reaps {
				continue // HostCommands' doc: out of its reach
			}
			t.Run(cr.name+"/"+gc.name, func(t *testing.T) {
				t.Parallel()
				fifo, ready := readyFIFO(t)
				mark := marker()
				cfg := testConfig(t)
				cfg.TestCmd = fmt.Sprintf(gc.command, mark, fifo)
				cfg.Commands = cr.commands
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				cancelled := make(chan time.Time, 1)
				go func() {
					select {
					case <-ready:
						cancelled <- time.Now()
						cancel()
					case <-ctx.Done():
					}
				}()
				runner := looptest.NewFakeRunner(nil).Always(agent(done, ""))
				rep, err := loop.Run(ctx, cfg, newStore(t, tasks("a")...), runner)
				returned := time.Now()
				if err != nil {
					t.Fatal(err)
				}
				if rep.Outcome != loop.OutcomeCancelled {
					t.Errorf("outcome %s (%s), want cancelled", rep.Outcome, rep.Message)
				}
				agentproctest.Cancelled(t, "gate", cancelled, returned, mark)
			})
		}
	}
}

// A test gate that passes but leaves a background job running is not
// held up by the job (which keeps the output open) and does not leave it
// behind.
func TestGateLeavesNoBackgroundJob(t *testing.T) {
	for _, cr := range commandRunners {
		t.Run(cr.name, func(t *testing.T) {
			t.Parallel()
			mark := marker()
			cfg := testConfig(t)
			cfg.TestCmd = mark + " sleep 30 & echo tests pass"
			cfg.Commands = cr.commands
			runner := looptest.NewFakeRunner(nil).Always(agent(done, ""))
			start := time.Now()
			rep, err := loop.Run(t.Context(), cfg, newStore(t, tasks("a")...), runner)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Run took %v", d)
			}
			if rep.Outcome != loop.OutcomeComplete {
				t.Errorf("outcome %s (%s), want complete", rep.Outcome, rep.Message)
			}
			agentproctest.NoneLeft(t, mark)
		})
	}
}
