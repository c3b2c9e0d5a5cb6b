package runnertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// then is what the fake agent does once it has printed its stream.
type then int

const (
	thenExit then = iota // exits with Exit.Code
	thenKill             // kills itself with SIGKILL
	thenHang             // starts a grandchild that ignores SIGTERM, says it is ready, and waits for ever, ignoring SIGTERM too
)

// outEnv, set in the agent's environment, names another file for it to
// print instead of its own stream (Concurrent: one agent, many answers).
const outEnv = "RALPH_RUNNERTEST_OUT"

// fake is one fake agent: a shell script and the directory where it
// records what it was given.
type fake struct {
	path  string // the script
	dir   string // its records: pid, child, cwd, env, args, stdin
	ready *os.File
}

// newFake writes a fake agent that prints x.Stdout and x.Stderr, then
// does what th says.
func newFake(t *testing.T, x Exit, th then) *fake {
	t.Helper()
	f := &fake{dir: t.TempDir()}
	f.path = filepath.Join(f.dir, "agent")
	write := func(name, data string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("out", x.Stdout, 0o644)
	write("err", x.Stderr, 0o644)
	var tail string
	switch th {
	case thenExit:
		tail = "exit " + strconv.Itoa(x.Code)
	case thenKill:
		tail = "kill -KILL $$"
	case thenHang:
		ready, err := makeFIFO(filepath.Join(f.dir, "ready"))
		if err != nil {
			t.Fatal(err)
		}
		f.ready = ready
		t.Cleanup(func() { ready.Close() })
		tail = `trap '' TERM
sleep 600 &
echo $! > "$rec/child"
echo ready > "$rec/ready"
wait`
	}
	write("agent", fmt.Sprintf(`#!/bin/sh
rec=%s
echo $$ > "$rec/pid"
pwd -P > "$rec/cwd"
env > "$rec/env"
for a in "$@"; do printf '%%s\n' "$a"; done > "$rec/args"
cat > "$rec/stdin"
cat "${%s:-$rec/out}"
cat "$rec/err" >&2
%s
`, shellQuote(f.dir), outEnv, tail), 0o755)
	return f
}

// output writes the i-th of the answers an agent prints when outEnv
// names it, and returns its path.
func (f *fake) output(t *testing.T, i int, stdout string) string {
	t.Helper()
	p := filepath.Join(f.dir, "out."+strconv.Itoa(i))
	if err := os.WriteFile(p, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// waitReady blocks until a hanging agent has started its grandchild, and
// reports whether it did (false: the test ended first).
func (f *fake) waitReady() bool {
	buf := make([]byte, 16)
	n, err := f.ready.Read(buf)
	return err == nil && n > 0
}

// record is what the agent was given.
type record struct {
	cwd   string
	env   []string
	args  []string
	stdin string
}

func (f *fake) record(t *testing.T) record {
	t.Helper()
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(f.dir, name))
		if err != nil {
			t.Fatalf("the fake agent left no %s: %v", name, err)
		}
		return string(data)
	}
	return record{
		cwd:   strings.TrimSuffix(read("cwd"), "\n"),
		env:   strings.Split(read("env"), "\n"),
		args:  strings.Split(strings.TrimSuffix(read("args"), "\n"), "\n"),
		stdin: read("stdin"),
	}
}

func (r record) hasEnv(kv string) bool {
	for _, e := range r.env {
		if e == kv {
			return true
		}
	}
	return false
}

// gone fails the test if the agent or its grandchild is still running
// once Run has returned.
func (f *fake) gone(t *testing.T) {
	t.Helper()
	for _, name := range []string{"pid", "child"} {
		data, err := os.ReadFile(filepath.Join(f.dir, name))
		if err != nil {
			continue // never started
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Errorf("%s file: %v", name, err)
			continue
		}
		if alive(pid) {
			t.Errorf("the agent's %s (pid %d) outlived Run", map[string]string{"pid": "process", "child": "grandchild"}[name], pid)
		}
	}
}
