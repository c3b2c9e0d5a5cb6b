package parallel

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
)

// A build cancelled while a worker's --setup runs returns at once and
// leaves none of the processes the setup started: a job it waits for, a
// nohup'd one, and (through agentproc.Commands, the CLI's, which reaps a
// process that left the group) one that made a session of its own. Each
// is marked by an environment entry; the setup says "ready" on a FIFO
// once it has started it, and the test cancels then.
func TestSetupCancelLeavesNoProcess(t *testing.T) {
	for _, cr := range []struct {
		name     string
		commands loop.CommandRunner
		reaps    bool
	}{
		{name: "HostCommands", commands: nil},
		{name: "agentproc.Commands", commands: &agentproc.Commands{}, reaps: true},
	} {
		for _, gc := range []struct {
			name   string
			setup  string
			setsid bool
		}{
			{name: "a background job", setup: `%[1]s sleep 30 & echo ready > %[2]s; wait`},
			{name: "nohup", setup: `%[1]s nohup sleep 30 >/dev/null 2>&1 & echo ready > %[2]s; wait`},
			{name: "setsid", setup: `%[1]s setsid sleep 30 & echo ready > %[2]s; wait`, setsid: true},
		} {
			if gc.setsid && !cr.reaps {
				continue // HostCommands' doc: out of its reach
			}
			t.Run(cr.name+"/"+gc.name, func(t *testing.T) {
				fifo := filepath.Join(t.TempDir(), "ready")
				if err := syscall.Mkfifo(fifo, 0o600); err != nil {
					t.Fatal(err)
				}
				// Read and write: opening never blocks, and closing it
				// ends the reader if the setup never writes.
				f, err := os.OpenFile(fifo, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				mark := "RALPH_TEST_GRANDCHILD=" + rand.Text()
				cfg := loop.DefaultConfig(gitRepo(t))
				cfg.SessionLog, cfg.RawLogs = false, false
				cfg.Commands = cr.commands
				pc := Config{Loop: cfg, Workers: 1, WorktreeDir: t.TempDir(), Setup: fmt.Sprintf(gc.setup, mark, fifo)}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				cancelled := make(chan time.Time, 1)
				go func() {
					if _, err := bufio.NewReader(f).ReadString('\n'); err == nil {
						cancelled <- time.Now()
						cancel()
					}
				}()
				rep, err := Run(ctx, pc, newStore(t, task("a")), writeTxt())
				returned := time.Now()
				if err != nil {
					t.Fatal(err)
				}
				if rep.Outcome != loop.OutcomeCancelled {
					t.Errorf("outcome %s (%s), want cancelled", rep.Outcome, rep.Message)
				}
				agentproctest.Cancelled(t, "setup", cancelled, returned, mark)
			})
		}
	}
}
