package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
)

// TestFeatureAddPlanFile runs the binary: after `feature add`, --plan FILE
// is the feature's plan to copy on both stores. The app's --plan of the
// same name (the plan's name on a server) once shadowed it: on SQLite the
// command failed ("--plan names a plan on a database server"), on
// PostgreSQL the file's name was taken for the plan's. The app's --plan,
// given before the command, still picks the plan on the server.
func TestFeatureAddPlanFile(t *testing.T) {
	bin := ralphBinary(t)
	env := append(os.Environ(), "RALPH_DIR=", "RALPH_DB=", "RALPH_PLAN=", "RALPH_AGENT_ID=", "RALPH_HOLDER=")
	const planText = "# Plan: auth\n1. Login form\n"
	// addAuth runs `feature add auth --plan FILE` (with the app's flags
	// before it) in dir and checks the file was copied.
	addAuth := func(t *testing.T, dir string, global ...string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "auth-plan.md")
		if err := os.WriteFile(file, []byte(planText), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append(global, "feature", "add", "auth", "--plan", file)
		code, out, errs := runBinary(t, bin, dir, env, args...)
		if code != 0 || errs != "" {
			t.Fatalf("ralph %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
		}
		if want := ".ralph/features/auth/spec.md\n.ralph/features/auth/plan.md\n"; out != want {
			t.Errorf("feature add printed %q, want %q", out, want)
		}
		got, err := os.ReadFile(filepath.Join(dir, ".ralph", "features", "auth", "plan.md"))
		if err != nil || string(got) != planText {
			t.Errorf("plan.md = %q (%v), want the file's %q", got, err, planText)
		}
	}
	ralph := func(t *testing.T, dir string, args ...string) string {
		t.Helper()
		code, out, errs := runBinary(t, bin, dir, env, args...)
		if code != 0 || errs != "" {
			t.Fatalf("ralph %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
		}
		return out
	}

	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		ralph(t, dir, "init")
		addAuth(t, dir)
		if out := ralph(t, dir, "feature", "list"); !strings.Contains(out, "auth ") {
			t.Errorf("feature list = %q, want auth", out)
		}
	})

	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		// Two plans on one server: dir remembers "first"; "second" is
		// named before the command, and feature add must use it.
		dir, other := t.TempDir(), t.TempDir()
		ralph(t, dir, "init", "--db", url, "--plan", "first")
		ralph(t, other, "init", "--db", url, "--plan", "second")
		addAuth(t, dir, "--plan", "second")
		if out := ralph(t, dir, "--plan", "second", "feature", "list"); !strings.Contains(out, "auth ") {
			t.Errorf("feature list on plan second = %q, want auth", out)
		}
		if out := ralph(t, dir, "feature", "list"); out != "" {
			t.Errorf("feature list on plan first = %q, want nothing (auth went to plan second)", out)
		}
		// With no plan named, the remembered one; the file is not taken
		// for a plan's name.
		if out := ralph(t, dir, "feature", "add", "billing", "--plan", filepath.Join(dir, ".ralph", "features", "auth", "plan.md")); !strings.Contains(out, "billing/plan.md") {
			t.Errorf("feature add billing printed %q", out)
		}
		if out := ralph(t, dir, "feature", "list"); !strings.Contains(out, "billing ") {
			t.Errorf("feature list on plan first = %q, want billing", out)
		}
	})
}
