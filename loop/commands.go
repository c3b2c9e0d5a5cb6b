package loop

import (
	"bytes"
	"context"
	"os"
	"os/exec"
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
// ctx stops the command and everything it started. RunCommand is safe for
// concurrent use.
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
}

// HostCommands runs commands on the host, in a process group of their
// own: a cancelled ctx kills the group, and the output pipes are let go
// gateWaitDelay after the command exits, whatever its leftovers hold. It
// is what a Config without Commands uses.
var HostCommands CommandRunner = CommandFunc(hostCommand)

func hostCommand(ctx context.Context, req CommandRequest) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", req.Command)
	cmd.Dir = req.Dir
	if len(req.Env) > 0 {
		cmd.Env = append(os.Environ(), req.Env...)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = gateWaitDelay
	inGroup(cmd)
	err := cmd.Run()
	return out.String(), err
}

// commands is the run's CommandRunner.
func (r *run) commands() CommandRunner {
	if r.cfg.Commands != nil {
		return r.cfg.Commands
	}
	return HostCommands
}
