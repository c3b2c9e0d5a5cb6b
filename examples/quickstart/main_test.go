package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary play the stand-in agent, as the quickstart
// binary does: the runner re-executes os.Executable().
func TestMain(m *testing.M) {
	if os.Getenv(standInEnv) == "1" {
		os.Exit(standIn(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// TestQuickstart runs the README's first command in-process: the whole plan
// must be finished by the real loop, store and runner, in priority and
// dependency order.
func TestQuickstart(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	out := stdout.String()
	if !strings.Contains(out, "open=0 active=0 done=5 failed=0 blocked=0 total=5") {
		t.Errorf("plan not finished:\n%s", out)
	}
	var order []string
	for _, line := range strings.Split(out, "\n") {
		if _, rest, ok := strings.Cut(line, "== iteration "); ok {
			_, task, _ := strings.Cut(rest, ": ")
			id, _, _ := strings.Cut(task, " ")
			order = append(order, id)
		}
	}
	// t-5 (priority 0) first; t-2 (1) before its dependent t-3; the parent
	// t-1 is never run: it is done when its children are; t-4 (3) last.
	if got, want := strings.Join(order, " "), "t-5 t-2 t-3 t-4"; got != want {
		t.Errorf("iteration order %q, want %q\n%s", got, want, out)
	}
}
