package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

// TestTaskCheckThroughTheBinary: `task add --check` stores the task's
// check; `task show` prints it, marking one an agent wrote
// (RALPH_AGENT_ID set), and `task show --json`, `task list --json` and
// `task export` carry it as check and check_by; a task without a check
// prints exactly as before (no check line, no keys).
func TestTaskCheckThroughTheBinary(t *testing.T) {
	bin := ralphBinary(t)
	dir := t.TempDir()
	base := append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=", "RALPH_DB=", "RALPH_PLAN=", "RALPH_SOCKET=")
	ralph := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, append([]string{"--dir", dir}, args...)...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil || errb.Len() > 0 {
			t.Fatalf("ralph %s: %v, stderr %q", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	ralph(base, "init")
	asAgent := append(base[:len(base):len(base)], "RALPH_AGENT_ID=agent-0123abcd")
	if id := ralph(base, "task", "add", "Lint", "--id", "lint", "--check", "  make lint  "); id != "lint\n" {
		t.Fatalf("task add printed %q", id)
	}
	ralph(asAgent, "task", "add", "Parse", "--id", "parse", "--check", `go test -run "TestParse" ./parser/`)
	ralph(asAgent, "task", "add", "Docs", "--id", "docs")

	show := ralph(base, "task", "show", "parse")
	if !strings.Contains(show, "check:       go test -run \"TestParse\" ./parser/  (written by agent agent-0123abcd)\n") {
		t.Errorf("task show parse does not mark the agent's check:\n%s", show)
	}
	if show := ralph(base, "task", "show", "lint"); !strings.Contains(show, "check:       make lint\n") || strings.Contains(show, "written by") {
		t.Errorf("task show lint: want the person's check, unmarked:\n%s", show)
	}
	if show := ralph(base, "task", "show", "docs"); strings.Contains(show, "check") {
		t.Errorf("task show docs: a task without a check shows none:\n%s", show)
	}

	var one map[string]any
	if err := json.Unmarshal([]byte(ralph(base, "task", "show", "parse", "--json")), &one); err != nil {
		t.Fatal(err)
	}
	if one["check"] != `go test -run "TestParse" ./parser/` || one["check_by"] != "agent-0123abcd" {
		t.Errorf("task show --json: check %v by %v", one["check"], one["check_by"])
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(ralph(base, "task", "list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	type check struct{ ID, Check, By any }
	var got []check
	for _, m := range list {
		got = append(got, check{m["id"], m["check"], m["check_by"]})
	}
	want := []check{{"lint", "make lint", nil}, {"parse", `go test -run "TestParse" ./parser/`, "agent-0123abcd"}, {"docs", nil, nil}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("task list --json checks (-want +got):\n%s", diff)
	}
	export := ralph(base, "task", "export")
	if !strings.Contains(export, `"check":"go test -run \"TestParse\" ./parser/","check_by":"agent-0123abcd"}`) ||
		!strings.Contains(export, `"status":"pending"}`+"\n") {
		t.Errorf("task export:\n%s", export)
	}
}

// TestTaskCheckJSONMatchesEncoder: the streamed `task list --json` and
// `task show --json` (encoding/json) agree on a task with a check, and
// an import of the export keeps the check and who wrote it.
func TestTaskCheckJSONMatchesEncoder(t *testing.T) {
	h := initHarness(t)
	h.env["RALPH_AGENT_ID"] = "agent-0000000a"
	h.add("Parse", "--id", "p", "--check", "go test ./parser/ && echo \"ok\"\n\tdone")
	delete(h.env, "RALPH_AGENT_ID")
	list := h.ok("task", "list", "--json")
	show := h.ok("task", "show", "p", "--json")
	var l []map[string]any
	var s map[string]any
	if err := json.Unmarshal([]byte(list), &l); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(show), &s); err != nil {
		t.Fatal(err)
	}
	delete(s, "logs")
	if diff := cmp.Diff(s, l[0]); diff != "" {
		t.Errorf("list --json and show --json differ (-show +list):\n%s", diff)
	}
	exported := h.ok("task", "export")
	g := initHarness(t)
	g.stdin = exported
	g.ok("task", "import", "-")
	if got := g.ok("task", "show", "p"); !strings.Contains(got, "(written by agent agent-0000000a)") {
		t.Errorf("after export and import, show:\n%s", got)
	}
}

// TestTaskListJSONStreamsTheEncodersBytes: the streamed `task list
// --json` writes, for tasks with and without a check, exactly what
// encoding/json writes for them.
func TestTaskListJSONStreamsTheEncodersBytes(t *testing.T) {
	tasks := []loop.Task{
		{ID: "a", Title: "A", Status: loop.StatusPending, Priority: 2},
		{ID: "b", Title: "B", Status: loop.StatusDone, Priority: 1, Check: "go test ./b/ <&> \"x\"\n\tnext", CheckBy: "agent-1"},
		{ID: "c", Title: "C", Status: loop.StatusPending, Priority: 2, Check: "make c", BlockedBy: []string{"a"}},
	}
	var want, got bytes.Buffer
	if err := writeJSON(&want, tasksJSON(tasks)); err != nil {
		t.Fatal(err)
	}
	out := newTaskListJSON(&got)
	for _, task := range tasks {
		if err := out.task(task); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.end(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.String(), got.String()); diff != "" {
		t.Errorf("streamed list (-encoding/json +streamed):\n%s", diff)
	}
}
