package codex

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

// UnreachableRetries is how many "Reconnecting... waiting for network"
// lines in a row make the runner stop Codex: when the API cannot be
// reached at all, Codex reconnects for ever, with a growing delay, even
// with its retries set to 0. Checked with 0.169.0 and a closed port: the
// first line comes at once, the second 5 s later, the third 10 s after
// that; two in a row stop Codex within about 5 s, as an API error.
const UnreachableRetries = 2

// Runner runs the Codex CLI (`codex exec --json`) as a loop.Runner. The
// zero value runs the codex found by Bin.Resolve("") with
// the default grace periods. A Runner is safe for concurrent use.
type Runner struct {
	// Path is the agent executable; empty means Bin.Resolve("").
	Path string
	// Grace is the time between SIGTERM and SIGKILL when the agent is
	// stopped; zero means agentproc.DefaultGrace.
	Grace time.Duration
	// ResultGrace is how long the agent may take to exit once its turn
	// has ended (turn.completed, turn.failed); zero means
	// agentproc.DefaultResultGrace.
	ResultGrace time.Duration
	// Now is the clock for event times and usage-limit resets; nil means
	// time.Now.
	Now func() time.Time
	// Sandbox, when not nil, runs the agent in it (ralph's --sandbox):
	// it writes only its tree (the project, or its worker's tree), a temp
	// directory and a scratch copy of its own state (StateDirs), and
	// works in a private copy of the tree's git metadata
	// (RunResult.Checkout says how that moved).
	Sandbox *sandbox.Boundary
}

var _ loop.Runner = (*Runner)(nil)

// Run runs one agent session; see loop.Runner. It returns an error only
// when the agent could not be started (loop.ErrAgentNotFound, a bad
// working directory, a log or instructions file that cannot be written).
// Events go to req.OnEvent one at a time; it must be quick (see
// agentproc.Spec.OnEvent).
func (r *Runner) Run(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	// Codex does not know Claude Code's custom slash commands: peek
	// mode's "/ralph-build <peek>" reaches it as the command's text.
	req.Prompt = loop.ExpandSlashCommand(req.Dir, req.Prompt)
	path, err := Bin.Resolve(r.Path)
	if err != nil {
		return loop.RunResult{}, err
	}
	var instructions string
	if req.ReplaceSystemPrompt && req.SystemPrompt != "" {
		// Named after this process, so that agentproc.Sweep removes it
		// if this process dies before remove.
		file, remove, err := agentproc.TempFile("codex-instructions", ".md", req.SystemPrompt)
		if err != nil {
			return loop.RunResult{}, fmt.Errorf("codex: instructions file: %w", err)
		}
		defer remove()
		instructions = file
	}
	env := Env(os.Environ(), req)

	// Codex reconnects for ever to an API it cannot reach: runCtx is
	// cancelled when it has said so UnreachableRetries times in a row.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu          sync.Mutex
		sess        Session
		unreachable bool
	)
	loc := codexLocation(env)
	decode := func(rd io.Reader, emit func(loop.Event)) error {
		d := NewDecoder(rd)
		d.Now, d.Location = r.Now, loc
		return decodeWith(d, func(ev loop.Event) {
			mu.Lock()
			sess.Add(ev)
			if sess.Unreachable >= UnreachableRetries && !unreachable {
				unreachable = true
				stop()
			}
			mu.Unlock()
			emit(ev)
		})
	}
	exit, err := agentproc.Run(runCtx, agentproc.Spec{
		Name:        Name,
		Path:        path,
		Args:        Args(req, instructions),
		Env:         env,
		Sandbox:     r.Sandbox,
		OwnKeys:     []string{EnvAPIKey, EnvCodexKey},
		State:       StateDirs(env),
		Stdin:       Stdin(req),
		Grace:       r.Grace,
		ResultGrace: r.ResultGrace,
		Decode:      decode,
		OnEvent:     req.OnEvent,
		Now:         r.Now,
	}.WithRequest(req))
	if err != nil {
		return loop.RunResult{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	// Codex exits 1 on SIGINT and 143 on SIGTERM without a turn end: the
	// signal that cancelled ctx may have reached it first. Run got runCtx:
	// a stop on cancel while ctx stands is the unreachable watch's.
	end := exit.Ending(ctx.Err() != nil, sess.Result, r.Now)
	res := Classify(&sess, end)
	res.Model, _ = ModelFor(req.Model)
	if res.Model == "" {
		res.Model = configModel(env)
	}
	Estimate(&res, res.Model)
	exit.Fill(&res)
	if end.GaveUp {
		res.Stderr += fmt.Sprintf("\nralph: the agent could not reach its API (%d reconnects in a row); it was stopped", sess.Unreachable)
	}
	return res, nil
}

// codexLocation is the time zone Codex prints reset times in: $TZ of its
// environment when set and known, else ralph's own local zone.
func codexLocation(env []string) *time.Location {
	if tz := agentproc.Getenv(env, "TZ"); tz != "" {
		if loc, err := time.LoadLocation(tz); err == nil {
			return loc
		}
	}
	return time.Local
}

// configModelRE finds the top-level model key of a config.toml.
var configModelRE = regexp.MustCompile(`^\s*model\s*=\s*"([^"]+)"`)

// configModel returns the model Codex's config.toml names at its top level
// (before any table), the model Codex runs when given none; "" when there
// is none or the file cannot be read.
func configModel(env []string) string {
	dirs := StateDirs(env)
	if len(dirs) == 0 {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(dirs[0].Dir, "config.toml"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "[") {
			break
		}
		if m := configModelRE.FindStringSubmatch(line); m != nil {
			return m[1]
		}
	}
	return ""
}
