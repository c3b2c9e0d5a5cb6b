package agentproc

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

// Commands runs a build's commands that are not an agent — the test gate,
// --setup (loop.CommandRunner) — as Run runs an agent: in a process group
// (a session of its own when sandboxed) with a parent-death signal, and
// everything it started stopped and reaped when it exits or its context
// is cancelled (SIGTERM, then SIGKILL after Grace). With Sandbox set it
// runs in the sandbox, as an agent working in the same directory would,
// without state directories: it writes only that tree and a temp
// directory of its own, and it is given neither what Withheld names nor,
// unless CommandRequest.UseAPIKey (--use-api-key), the model providers'
// API keys (APIKey): the agent writes the tests and the setup script the
// command runs, so what they see the agent sees. The zero value runs on
// the host, with ralph's whole environment. A Commands is safe for
// concurrent use.
type Commands struct {
	// Sandbox, when not nil, is where the commands run.
	Sandbox *sandbox.Boundary
	// Grace is the time between SIGTERM and SIGKILL; 0 means
	// DefaultGrace.
	Grace time.Duration
}

var _ loop.CommandRunner = (*Commands)(nil)

// apiKeyEnv are the model providers' API keys and tokens, billed per
// token, that the agent CLIs are started without unless --use-api-key
// (claude, agents/codex), and that the gemini agent may use as its login.
var apiKeyEnv = map[string]bool{
	"ANTHROPIC_API_KEY":    true,
	"ANTHROPIC_AUTH_TOKEN": true,
	"OPENAI_API_KEY":       true,
	"CODEX_API_KEY":        true,
	"GEMINI_API_KEY":       true,
	"GOOGLE_API_KEY":       true,
}

// APIKey reports whether key is a model provider's API key or token
// (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, OPENAI_API_KEY,
// CODEX_API_KEY, GEMINI_API_KEY, GOOGLE_API_KEY), which a sandboxed
// command is not given unless CommandRequest.UseAPIKey.
func APIKey(key string) bool { return apiKeyEnv[key] }

// env is the command's environment: ralph's with req.Env on top, and in
// the sandbox without the API keys unless req.UseAPIKey (Run drops what
// Withheld names).
func (c *Commands) env(req loop.CommandRequest) []string {
	if c.Sandbox == nil || req.UseAPIKey {
		return append(os.Environ(), req.Env...)
	}
	return Environ(os.Environ(), req.Env, APIKey)
}

// commandOutputMax bounds the output RunCommand keeps: the end of it.
const commandOutputMax = 64 << 10

// RunCommand runs req.Command with sh -c in req.Dir, with ralph's
// environment and req.Env, and returns its standard output and standard
// error as they interleaved (the last 64 KiB), then whatever the sandbox
// itself said when it failed. The error is non-nil when the command could
// not start, did not exit 0 ("exit status N"), or was stopped because ctx
// was cancelled (ctx's error).
func (c *Commands) RunCommand(ctx context.Context, req loop.CommandRequest) (string, error) {
	out := &tailBuffer{max: commandOutputMax}
	exit, err := Run(ctx, Spec{
		Name: "sh",
		Path: shell(),
		// Standard error joins standard output in the shell itself, so
		// the two keep their order.
		Args:    []string{"-c", "exec 2>&1\n" + req.Command},
		Dir:     req.Dir,
		Env:     c.env(req),
		Stdin:   req.Stdin,
		Sandbox: c.Sandbox,
		Grace:   c.Grace,
		Decode: func(r io.Reader, _ func(loop.Event)) error {
			_, err := io.Copy(out, r)
			return err
		},
	})
	if err != nil {
		return "", err
	}
	output := out.String()
	switch {
	case exit.Cancelled && exit.Stop == StopCancel:
		return output, ctx.Err()
	case exit.ExitCode != 0:
		if s := strings.TrimSpace(exit.Stderr); s != "" {
			output += s + "\n"
		}
		return output, fmt.Errorf("exit status %d", exit.ExitCode)
	}
	return output, nil
}

// shell finds sh: on PATH, else /bin/sh. Test, check and setup commands
// are POSIX shell on every system, so that a plan means the same on every
// machine of a team; on Windows, where sh is seldom on PATH, it is also
// looked for where Git for Windows (which ralph needs anyway) keeps it,
// beside git.exe: its bin\ and usr\bin\ folders.
func shell() string {
	if sh, err := exec.LookPath("sh"); err == nil {
		return sh
	}
	if runtime.GOOS != "windows" {
		return "/bin/sh"
	}
	if git, err := exec.LookPath("git"); err == nil {
		root := filepath.Dir(filepath.Dir(git)) // …\Git\cmd\git.exe
		for _, p := range []string{`bin\sh.exe`, `usr\bin\sh.exe`} {
			if fi, err := os.Stat(filepath.Join(root, p)); err == nil && fi.Mode().IsRegular() {
				return filepath.Join(root, p)
			}
		}
	}
	return "sh" // Run says it is not found
}
