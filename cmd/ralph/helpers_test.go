package main

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// t0 is the harness clock's start.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// harness runs the CLI in-process against one project directory, with a
// clock the test moves and an environment it controls.
type harness struct {
	t     *testing.T
	dir   string
	clock time.Time
	env   map[string]string
	stdin string
}

type result struct {
	code           int
	stdout, stderr string
}

// newHarness returns a harness on a fresh, uninitialised directory.
func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, dir: t.TempDir(), clock: t0, env: map[string]string{"USER": "tester"}}
}

// initHarness returns a harness on an initialised project.
func initHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.ok("init")
	return h
}

// clone returns a harness on a copy of h's project, for tests that each
// need the same starting point and would be slow to build it every time.
func (h *harness) clone(t *testing.T) *harness {
	t.Helper()
	c := &harness{t: t, dir: t.TempDir(), clock: h.clock, env: maps.Clone(h.env), stdin: h.stdin}
	if err := os.CopyFS(c.dir, os.DirFS(h.dir)); err != nil {
		t.Fatal(err)
	}
	return c
}

func (h *harness) config(stdout, stderr *bytes.Buffer) appConfig {
	return appConfig{
		stdout:      stdout,
		stderr:      stderr,
		stdin:       strings.NewReader(h.stdin),
		getenv:      func(k string) string { return h.env[k] },
		now:         func() time.Time { return h.clock },
		busyTimeout: 200 * time.Millisecond,
	}
}

// run runs `ralph --dir DIR args…`.
func (h *harness) run(args ...string) result {
	h.t.Helper()
	var out, errb bytes.Buffer
	app := newAppConfig(h.config(&out, &errb))
	code := runApp(h.t.Context(), app, append([]string{"ralph", "--dir", h.dir}, args...), &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok runs a command that must succeed and returns its stdout.
func (h *harness) ok(args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	if r.code != 0 || r.stderr != "" {
		h.t.Fatalf("ralph %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// add adds a task and returns its id.
func (h *harness) add(args ...string) string {
	h.t.Helper()
	return strings.TrimSpace(h.ok(append([]string{"task", "add"}, args...)...))
}

func (h *harness) write(name, content string) string {
	h.t.Helper()
	path := filepath.Join(h.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	return path
}

func (h *harness) read(name string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, name))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

// snapshot is everything the database holds, as the store reports it.
type snapshot struct {
	Tasks    []loop.Task
	Logs     map[string][]loop.LogEntry
	Features []loop.Feature
}

// dump reads the project's database directly, under the harness clock (so
// that reading recovers no lease the CLI would not have).
func (h *harness) dump() snapshot {
	h.t.Helper()
	st, err := dag.OpenExisting(h.t.Context(), filepath.Join(h.dir, ".ralph", "progress.db"), dag.Options{Now: func() time.Time { return h.clock }})
	if err != nil {
		h.t.Fatal(err)
	}
	defer st.Close()
	var s snapshot
	if s.Tasks, err = st.List(h.t.Context(), dag.ListParams{}); err != nil {
		h.t.Fatal(err)
	}
	s.Logs = map[string][]loop.LogEntry{}
	for _, t := range s.Tasks {
		if s.Logs[t.ID], err = st.Logs(h.t.Context(), t.ID); err != nil {
			h.t.Fatal(err)
		}
	}
	if s.Features, err = st.Features(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
	return s
}

// files returns every file under the project with its content.
func (h *harness) files() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(h.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h.dir, path)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(path)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}
