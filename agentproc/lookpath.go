package agentproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

// Bin says how to find an agent CLI's executable: by its name on PATH,
// or at the path a variable of ralph's environment names. Each runner
// has one (claude.Bin, codex.Bin, …).
type Bin struct {
	// Name is the executable's name on PATH: "codex".
	Name string
	// EnvVar is the variable naming the executable: "RALPH_CODEX".
	EnvVar string
	// Install says how to install the agent: "install the Codex CLI
	// (npm install -g @openai/codex)".
	Install string
}

// LookPath resolves the executable: path (the caller's, such as a
// command-line flag's value) if not empty, else env (the value of
// EnvVar), else Name on PATH. The path returned is absolute. The error
// is a *NotFoundError, which is loop.ErrAgentNotFound.
func (b Bin) LookPath(path, env string) (string, error) {
	e := &NotFoundError{Bin: b, Path: path}
	if path == "" {
		e.Path, e.FromEnv = env, true
	}
	try := e.Path
	if try == "" {
		try, e.FromEnv = b.Name, false
	}
	found, err := exec.LookPath(try)
	if err != nil {
		e.Err = unwrapExecErr(err)
		return "", e
	}
	if abs, err := filepath.Abs(found); err == nil {
		found = abs
	}
	return found, nil
}

// Resolve is the executable a runner runs: path when not empty (its
// Runner.Path), else LookPath with EnvVar's value in ralph's environment.
func (b Bin) Resolve(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	return b.LookPath("", os.Getenv(b.EnvVar))
}

// NotFoundError is Bin.LookPath's error: the agent's executable is not
// there. It is loop.ErrAgentNotFound (errors.Is) and unwraps to why the
// path is not an executable. Its text names the caller's path as "path";
// a caller with names of its own for it (the CLI's --agent-bin) words
// the error with Missing and Bin.Install.
type NotFoundError struct {
	Bin
	// Path is what is not an executable; "" when Name is not on PATH.
	Path string
	// FromEnv says that Path is EnvVar's value, not the caller's.
	FromEnv bool
	// Err is why Path is not an executable.
	Err error
}

// Error is the error in the library's words: "loop: agent executable not
// found: ", Missing("path"), and how to install or name the executable.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%v: %s; %s or name the executable in $%s", loop.ErrAgentNotFound, e.Missing("path"), e.Install, e.EnvVar)
}

// Missing says what is missing: "no codex on PATH", `$RALPH_CODEX "X" is
// not an executable (why)`, or, for the caller's path, the same with
// caller (such as "--agent-bin") in the place of $RALPH_CODEX.
func (e *NotFoundError) Missing(caller string) string {
	from := caller
	switch {
	case e.Path == "":
		return fmt.Sprintf("no %s on PATH", e.Name)
	case e.FromEnv:
		from = "$" + e.EnvVar
	}
	return fmt.Sprintf("%s %q is not an executable (%v)", from, e.Path, e.Err)
}

// Is reports whether target is loop.ErrAgentNotFound.
func (e *NotFoundError) Is(target error) bool { return target == loop.ErrAgentNotFound }

func (e *NotFoundError) Unwrap() error { return e.Err }

func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// Environ returns base (ralph's own environment, os.Environ()) with extra
// on top — a later entry wins, in the place of the first — without the
// keys drop says (nil drops none) and without entries that are not
// KEY=value.
func Environ(base, extra []string, drop func(key string) bool) []string {
	index := make(map[string]int, len(base)+len(extra))
	out := make([]string, 0, len(base)+len(extra))
	for _, all := range [][]string{base, extra} {
		for _, kv := range all {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || k == "" || drop != nil && drop(k) {
				continue
			}
			if i, seen := index[k]; seen {
				out[i] = kv
				continue
			}
			index[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

// Home is the home directory an agent with environment env uses for its
// own state: $HOME in env, else this user's home directory; "" when
// neither is known.
func Home(env []string) string {
	if home := Getenv(env, "HOME"); home != "" {
		return home
	}
	home, _ := os.UserHomeDir()
	return home
}

// Getenv returns key's value in env, the last one when key is there more
// than once (as exec.Cmd passes it), or "" when it is not there.
func Getenv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}
