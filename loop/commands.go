package loop

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// A CommandRunner runs the shell commands of a run that are not an agent's
// session: the test gate (Config.TestCmd, or the one AGENTS.md names) and
// a parallel build's --setup. A sandboxed build runs them in the agent's
// sandbox, in the tree the agent worked in (agentproc.Commands does, with
// the process handling agents get); Config.Commands nil runs them on the
// host (HostCommands).
//
// RunCommand runs req.Command with sh -c and returns its standard output
// and standard error together (or their end, for a long one), with a
// non-nil error when it could not start or did not exit 0. A cancelled
// ctx stops the command and everything it started (HostCommands: what
// stayed in its process group), and RunCommand returns promptly; a
// command that exits leaves nothing it started running. RunCommand is
// safe for concurrent use.
type CommandRunner interface {
	RunCommand(ctx context.Context, req CommandRequest) (output string, err error)
}

// CommandFunc adapts a function to the CommandRunner interface.
type CommandFunc func(ctx context.Context, req CommandRequest) (string, error)

// RunCommand calls f(ctx, req).
func (f CommandFunc) RunCommand(ctx context.Context, req CommandRequest) (string, error) {
	return f(ctx, req)
}

// CommandRequest is one command to run.
type CommandRequest struct {
	// Command is the shell command, run with sh -c.
	Command string
	// Dir is its working directory: the project root or a worker's tree.
	Dir string
	// Env holds KEY=VALUE entries on top of ralph's own environment.
	Env []string
	// UseAPIKey is the run's Config.UseAPIKey: a CommandRunner that
	// withholds the model providers' API keys from a sandboxed command
	// (agentproc.Commands) keeps them when it is set.
	UseAPIKey bool
	// Stdin is written to the command's standard input, which is then
	// closed ("" is an empty input).
	Stdin string
}

// gateWaitDelay bounds how long a process that left a HostCommands
// command's group may hold its output after the group is gone, and how
// long a cancelled shell may take to die of its group's SIGKILL.
const gateWaitDelay = 5 * time.Second

// HostCommands runs commands on the host, in a process group of their
// own, with nothing of that group left behind: a cancelled ctx kills the
// group (SIGKILL), and so does the shell's exit, so that a command that
// backgrounded a child (`sleep 30 &`, a server a test started and did
// not stop) returns when its shell does. A process that left the group
// (setsid) is out of its reach and may hold the output: it is let go
// gateWaitDelay after the group is gone. agentproc.Commands, which the
// CLI uses (on the host or in the sandbox), reaps such a process too. It
// is what a Config without Commands uses. Where there are no process
// groups (not unix) a cancel kills the shell alone.
var HostCommands CommandRunner = CommandFunc(hostCommand)

func hostCommand(ctx context.Context, req CommandRequest) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", req.Command)
	cmd.Dir = req.Dir
	cmd.Stdin = strings.NewReader(req.Stdin)
	if len(req.Env) > 0 {
		cmd.Env = append(os.Environ(), req.Env...)
	}
	// The output goes through a pipe of the function's own, not one
	// exec.Cmd makes: Wait then returns when the shell exits, not when
	// the last process holding the pipe lets go of it, and the group can
	// be killed in between.
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer pr.Close()
	cmd.Stdout = pw
	cmd.Stderr = pw
	// After a cancel, the shell is killed outright (exec.Cmd's Kill) if
	// the group's SIGKILL has not ended it within this: it always has.
	cmd.WaitDelay = gateWaitDelay
	inGroup(cmd)
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&out, pr)
	}()
	err = cmd.Wait()
	killGroup(cmd)
	t := time.NewTimer(gateWaitDelay)
	defer t.Stop()
	select {
	case <-copied:
	case <-t.C:
		pr.Close() // a process that left the group holds the pipe
		<-copied
	}
	return out.String(), err
}

// commands is the run's CommandRunner.
func (r *run) commands() CommandRunner {
	if r.cfg.Commands != nil {
		return r.cfg.Commands
	}
	return HostCommands
}
