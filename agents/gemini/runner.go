package gemini

import (
	"context"
	"os"
	"time"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

// Runner runs the Gemini CLI as a loop.Runner. The zero value runs the
// `gemini` found by Bin.Resolve("") with the default grace
// periods. A Runner is safe for concurrent use.
type Runner struct {
	// Path is the CLI executable; empty means Bin.Resolve("").
	Path string
	// Grace is the time between SIGTERM and SIGKILL when the agent is
	// stopped; zero means agentproc.DefaultGrace.
	Grace time.Duration
	// ResultGrace is how long the agent may take to exit once its result
	// line is read; zero means agentproc.DefaultResultGrace.
	ResultGrace time.Duration
	// Now is the clock for event times and usage-limit resets; nil means
	// time.Now.
	Now func() time.Time
	// Sandbox, when not nil, runs the agent in it (ralph's --sandbox):
	// it writes only its tree (the project, or its worker's tree), a temp
	// directory and a scratch copy of its own state (StateDirs), and
	// works in a private copy of the tree's git metadata
	// (RunResult.Checkout says how that moved).
	//
	// A verifier's session (a request that is not Sandboxed) runs in it
	// with the tree read-only as well, and gets the CLI's shell: see
	// VerifierSandbox.
	Sandbox *sandbox.Boundary
	// VerifierSandbox, when not nil and Sandbox is, is where a verifier's
	// session runs: in the sandbox with its tree read-only
	// (agentproc.Spec.ReadOnly), with every tool of the CLI (--yolo), so
	// that it can run the tests. A write into the tree fails there
	// ("Read-only file system"). When both are nil the verifier runs
	// outside any sandbox with the CLI's read tools only: it cannot run
	// commands (see the package documentation).
	VerifierSandbox *sandbox.Boundary
}

var _ loop.Runner = (*Runner)(nil)

// Run runs one session; see loop.Runner. It returns an error only when the
// CLI could not be started (loop.ErrAgentNotFound, a bad Dir, a log file or
// system prompt that cannot be written). req.MaxTurns is not passed on:
// the CLI takes a turn limit only from its settings
// (model.maxSessionTurns), not from its command line or environment.
func (r *Runner) Run(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	// Gemini CLI does not know Claude Code's custom slash commands: peek
	// mode's "/ralph-build <peek>" reaches it as the command's text.
	req.Prompt = loop.ExpandSlashCommand(req.Dir, req.Prompt)
	path, err := Bin.Resolve(r.Path)
	if err != nil {
		return loop.RunResult{}, err
	}
	env := Env(os.Environ(), req)
	var contextDir string
	if req.SystemPrompt != "" && ctx.Err() == nil {
		dir, remove, err := WriteContext(req.SystemPrompt, ContextFileName(env, req.Dir))
		if err != nil {
			return loop.RunResult{}, err
		}
		defer remove()
		contextDir = dir
	}
	box, readOnly := agentproc.Boundary(req, r.Sandbox, r.VerifierSandbox)
	dec := NewDecoder(r.Now)
	var sess Session
	x, err := agentproc.Run(ctx, agentproc.Spec{
		Name:        Name,
		Path:        path,
		Args:        Args(req, contextDir, req.Sandboxed || readOnly),
		Env:         env,
		Sandbox:     box,
		ReadOnly:    readOnly,
		OwnKeys:     []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"},
		State:       StateDirs(env),
		Stdin:       req.Prompt,
		Grace:       r.Grace,
		ResultGrace: r.ResultGrace,
		Decode:      dec.Decode,
		OnEvent: func(ev loop.Event) {
			sess.Add(ev)
			if req.OnEvent != nil {
				req.OnEvent(ev)
			}
		},
		Now: r.Now,
	}.WithRequest(req))
	if err != nil {
		return loop.RunResult{}, err
	}
	res := Classify(&sess, x.Ending(x.Cancelled, sess.Result, r.Now))
	if res.Model == "" {
		res.Model = Model(req.Model)
	}
	x.Fill(&res)
	return res, nil
}
