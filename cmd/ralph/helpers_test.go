package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
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
	// db and plan, when db is set, keep the project's plan on a
	// PostgreSQL server (--db, --plan): see TestCLIOnPostgres.
	db, plan string
}

// harnessServer, when set, is the PostgreSQL URL new harnesses keep
// their plans on (TestCLIOnPostgres sets it for the tests it runs).
var harnessServer string

type result struct {
	code           int
	stdout, stderr string
}

// newHarness returns a harness on a fresh, uninitialised directory.
func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), clock: t0, env: map[string]string{"USER": "tester"}}
	if harnessServer != "" {
		h.db, h.plan = harnessServer, fmt.Sprintf("plan-%d", harnessPlans.Add(1))
	}
	return h
}

var harnessPlans atomic.Int64

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
	if h.db != "" {
		// A plan on a server is copied into a new plan: its tasks and
		// features (the history stays behind).
		c.db, c.plan = h.db, fmt.Sprintf("plan-%d", harnessPlans.Add(1))
		c.ok("init")
		from, to := h.store(), c.store()
		defer from.Close()
		defer to.Close()
		fs, err := from.Features(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if _, err := to.AddFeature(t.Context(), dag.FeatureParams{Name: f.Name, SpecPath: f.SpecPath, PlanPath: f.PlanPath}); err != nil {
				t.Fatal(err)
			}
		}
		tasks, err := from.Export(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := to.Import(t.Context(), tasks); err != nil {
			t.Fatal(err)
		}
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
	argv := []string{"ralph", "--dir", h.dir}
	if h.db != "" {
		argv = append(argv, "--db", h.db, "--plan", h.plan)
	}
	code := runApp(h.t.Context(), app, append(argv, args...), &errb)
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

// store opens the project's plan directly, under the harness clock (so
// that reading recovers no lease the CLI would not have).
func (h *harness) store() *dag.Store {
	h.t.Helper()
	opts := dag.Options{Now: func() time.Time { return h.clock }}
	var st *dag.Store
	var err error
	if h.db != "" {
		st, err = postgres.Open(h.t.Context(), postgres.Config{URL: h.db, Plan: h.plan, Options: dag.ServerOptions{Options: opts}})
	} else {
		st, err = dag.OpenExisting(h.t.Context(), filepath.Join(h.dir, ".ralph", "progress.db"), opts)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// dump reads the project's database directly, under the harness clock (so
// that reading recovers no lease the CLI would not have).
func (h *harness) dump() snapshot {
	h.t.Helper()
	st := h.store()
	defer st.Close()
	var err error
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
