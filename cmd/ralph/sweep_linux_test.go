package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// leftover starts `sleep 60` as a ralph that is gone would have left it: a
// RALPH_HOLDER naming a process that ran on this host and has exited.
func leftover(t *testing.T) *exec.Cmd {
	t.Helper()
	holder := looptest.DeadHolder(t)
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), loop.EnvHolder+"="+holder.String())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// running reports whether the process cmd started is still running (not
// exited, not a zombie).
func running(cmd *exec.Cmd) bool {
	_, err := loop.ProcessStart(cmd.Process.Pid)
	return err == nil
}

// build, plan and prompt stop what a dead ralph left before their agent
// runs, and say so in one line; a dry run starts nothing and sweeps
// nothing.
func TestSweepAtStart(t *testing.T) {
	// A host identity of its own: the sweeps judge only the dead holder
	// made here, never a process on the machine that this test did not
	// start (and no other sweep judges it).
	t.Setenv(loop.EnvHostID, "ralph-cmd-sweep-test-"+strconv.Itoa(os.Getpid()))
	tests := []struct {
		name  string
		setup func(h *harness) []string // the command's arguments
		step  agentStep
		swept bool
	}{
		{
			name:  "build",
			setup: func(h *harness) []string { h.add("A task"); return []string{"build"} },
			step:  agentStep{Text: "<task-done>t-1</task-done>"},
			swept: true,
		},
		{
			name: "plan",
			setup: func(h *harness) []string {
				h.write("specs/auth.md", authSpec)
				return []string{"plan"}
			},
			step:  agentStep{Sh: planTwoTasks, Text: "<promise>COMPLETE</promise>"},
			swept: true,
		},
		{
			name:  "prompt",
			setup: func(h *harness) []string { return []string{"prompt", h.write("tidy.md", tidyPrompt)} },
			step:  agentStep{Text: "Tidied."},
			swept: true,
		},
		{
			name:  "build --dry-run",
			setup: func(h *harness) []string { h.add("A task"); return []string{"build", "--dry-run"} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := initHarness(t)
			args := tt.setup(h)
			agent, _ := fakeAgentPath(t, tt.step)
			left := leftover(t)
			r := h.runAgentCmd(t.Context(), args[0], agent, args[1:]...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
			}
			note := "ralph: note: stopped 1 process left running by a ralph that is gone: " + strconv.Itoa(left.Process.Pid) + " " + shorten(strings.Join(left.Args, " "), 40) + "\n"
			if got := strings.Contains(r.stderr, note); got != tt.swept {
				t.Errorf("stderr %q; want the note %q: %v", r.stderr, note, tt.swept)
			}
			if running(left) == tt.swept {
				t.Errorf("the leftover runs after the command: %v, want %v", running(left), !tt.swept)
			}
		})
	}
}
