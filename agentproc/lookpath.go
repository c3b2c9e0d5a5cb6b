package agentproc

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

// LookPath resolves an agent executable: flag (the value of the option
// flagName, such as --agent-bin) if not empty, else env (the value of the
// environment variable envName, such as $RALPH_CODEX), else name on PATH.
// The path returned is absolute. The error wraps loop.ErrAgentNotFound,
// names where the missing path came from (`--agent-bin "X"`,
// `$RALPH_CODEX "X"`, or "no codex on PATH"), and ends with hint (how to
// install the agent or name it).
func LookPath(name, flag, flagName, env, envName, hint string) (string, error) {
	path, from := flag, flagName
	if path == "" {
		path, from = env, "$"+envName
	}
	if path == "" {
		path, from = name, ""
	}
	found, err := exec.LookPath(path)
	if err != nil {
		if from == "" {
			return "", fmt.Errorf("%w: no %s on PATH; %s", loop.ErrAgentNotFound, name, hint)
		}
		return "", fmt.Errorf("%w: %s %q is not an executable (%v); %s", loop.ErrAgentNotFound, from, path, unwrapExecErr(err), hint)
	}
	if abs, err := filepath.Abs(found); err == nil {
		found = abs
	}
	return found, nil
}

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
