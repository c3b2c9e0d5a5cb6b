package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// step is one command of a scripted session and what it must print.
type step struct {
	args   string // split on spaces; "~" stands for a space inside an argument
	code   int
	stdout string
}

// runScript runs steps in order on h.
func runScript(t *testing.T, h *harness, steps []step) {
	t.Helper()
	for _, s := range steps {
		var args []string
		for _, f := range strings.Fields(s.args) {
			args = append(args, strings.ReplaceAll(f, "~", " "))
		}
		r := h.run(args...)
		if r.code != s.code || r.stdout != s.stdout {
			t.Fatalf("ralph %s:\n got exit %d, stdout %q, stderr %q\nwant exit %d, stdout %q", s.args, r.code, r.stdout, r.stderr, s.code, s.stdout)
		}
	}
}

func TestTaskWorkflow(t *testing.T) {
	h := initHarness(t)
	h.env["RALPH_AGENT_ID"] = "agent-00000001"
	runScript(t, h, []step{
		{args: "task add Fix~login -d The~form~rejects~valid~passwords --priority 1", stdout: "t-1\n"},
		{args: "task add Write~docs --blocked-by t-1", stdout: "t-2\n"},
		{args: "task add Epic --id e1 -p 3", stdout: "e1\n"},
		{args: "task add Child --parent e1 --id c1", stdout: "c1\n"},
		{args: "task dep add c1 t-2"},
		{args: "task list", stdout: "ID   STATUS   PRI  TITLE\n" +
			"t-1  pending  1    Fix login\n" +
			"t-2  pending  2    Write docs  (after t-1)\n" +
			"e1   pending  3    Epic\n" +
			"c1   pending  2    Child  (parent e1; after t-2)\n"},
		{args: "task plan-status", stdout: "open=4 active=0 done=0 failed=0 blocked=0 total=4\n"},
		{args: "task claim", stdout: "t-1\n"},
		{args: "task list --status in_progress", stdout: "ID   STATUS       PRI  TITLE\n" +
			"t-1  in_progress  1    Fix login  (by agent-00000001)\n"},
		{args: "task claim", code: 2},
		{args: "task peek"},
		{args: "task done t-1 --summary form~fixed"},
		{args: "task claim t-2 --agent other", stdout: "t-2\n"},
		{args: "task release --agent other", stdout: "t-2\n"},
		{args: "task release --agent other"},
		{args: "task claim", stdout: "t-2\n"},
		{args: "task fail t-2 --reason tests~fail"},
		{args: "task plan-status", stdout: "open=2 active=0 done=1 failed=1 blocked=0 total=4\n"},
		{args: "task reset t-2"},
		{args: "task block t-2 --reason needs~a~decision"},
		{args: "task plan-status", stdout: "open=3 active=0 done=1 failed=0 blocked=1 total=4\n"},
		{args: "task unblock t-2"},
		{args: "task claim", stdout: "t-2\n"},
		{args: "task done t-2"},
		{args: "task claim", stdout: "c1\n"},
		{args: "task done c1"},
		{args: "task plan-status", stdout: "open=0 active=0 done=4 failed=0 blocked=0 total=4\n"},
		{args: "task plan-status --json", stdout: `{
  "open": 0,
  "active": 0,
  "done": 4,
  "failed": 0,
  "blocked": 0,
  "total": 4
}
`},
		{args: "task peek"},
		{args: "task peek --json", stdout: "{\n  \"claimable\": [],\n  \"active\": []\n}\n"},
		{args: "task claim", code: 2},
	})
}

func TestTaskShow(t *testing.T) {
	h := initHarness(t)
	h.env["RALPH_AGENT_ID"] = "agent-0000000a"
	h.add("Parent", "--id", "p")
	h.add("Blocker", "--id", "b")
	h.ok("feature", "add", "auth")
	h.add("Login <form> & more", "--id", "x", "--parent", "p", "--blocked-by", "b", "--feature", "auth", "-d", "line one\nline two", "-p", "0")
	h.clock = t0.Add(time.Minute)
	h.ok("task", "claim", "b")
	h.clock = t0.Add(2 * time.Minute)
	h.ok("task", "done", "b", "--summary", "blocker done")

	wantJSON := `{
  "id": "x",
  "title": "Login <form> & more",
  "description": "line one\nline two",
  "status": "pending",
  "priority": 0,
  "parent_id": "p",
  "feature": "auth",
  "claimed_by": "",
  "retry_count": 0,
  "blocked_by": [
    "b"
  ],
  "created_at": "2026-01-02T03:04:05Z",
  "updated_at": "2026-01-02T03:04:05Z",
  "logs": []
}
`
	if diff := cmp.Diff(wantJSON, h.ok("task", "show", "x", "--json")); diff != "" {
		t.Errorf("show --json (-want +got):\n%s", diff)
	}
	var b map[string]any
	if err := json.Unmarshal([]byte(h.ok("task", "show", "--json", "b")), &b); err != nil {
		t.Fatal(err)
	}
	// Which events the store logs is its business; the CLI must show them
	// all, in order, in both forms.
	var wantLogs []any
	logText := ""
	for _, l := range h.dump().Logs["b"] {
		wantLogs = append(wantLogs, map[string]any{"at": jsonTime(l.At), "kind": l.Kind, "message": l.Message, "actor": l.Actor})
		logText += fmt.Sprintf("  %s  %-15s %-16s %s\n", l.At.UTC().Format(time.RFC3339), l.Kind, l.Actor, l.Message)
	}
	if len(wantLogs) == 0 || wantLogs[len(wantLogs)-1].(map[string]any)["message"] != "blocker done" {
		t.Fatalf("the store did not log the summary: %v", wantLogs)
	}
	// The history names who did what: the agent claimed and finished b.
	for _, l := range wantLogs {
		if l.(map[string]any)["actor"] != "agent-0000000a" {
			t.Errorf("log entry %v: want actor agent-0000000a", l)
		}
	}
	if diff := cmp.Diff(wantLogs, b["logs"]); diff != "" {
		t.Errorf("show --json logs (-want +got):\n%s", diff)
	}
	if b["parent_id"] != nil {
		t.Errorf("parent_id = %v, want null", b["parent_id"])
	}
	wantText := `id:          b
title:       Blocker
status:      done
priority:    2
created:     2026-01-02T03:04:05Z
updated:     2026-01-02T03:06:05Z

log:
` + logText
	if diff := cmp.Diff(wantText, h.ok("task", "show", "b")); diff != "" {
		t.Errorf("show (-want +got):\n%s", diff)
	}
}

func TestTaskListJSON(t *testing.T) {
	h := initHarness(t)
	if diff := cmp.Diff("[]\n", h.ok("task", "list", "--json")); diff != "" {
		t.Errorf("empty list --json (-want +got):\n%s", diff)
	}
	h.add("One")
	h.add("Two", "--parent", "t-1")
	var got []map[string]any
	if err := json.Unmarshal([]byte(h.ok("task", "list", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		return ks
	}
	wantKeys := []string{"id", "title", "description", "status", "priority", "parent_id", "feature", "claimed_by", "retry_count", "blocked_by", "created_at", "updated_at"}
	sortStrings := cmp.Transformer("sort", func(in []string) []string {
		out := append([]string(nil), in...)
		for i := range out {
			for j := i + 1; j < len(out); j++ {
				if out[j] < out[i] {
					out[i], out[j] = out[j], out[i]
				}
			}
		}
		return out
	})
	if len(got) != 2 {
		t.Fatalf("list --json: %d tasks, want 2", len(got))
	}
	for _, obj := range got {
		if diff := cmp.Diff(wantKeys, keys(obj), sortStrings); diff != "" {
			t.Errorf("keys of %v (-want +got):\n%s", obj["id"], diff)
		}
	}
	if got[0]["parent_id"] != nil || got[1]["parent_id"] != "t-1" {
		t.Errorf("parent_id = %v, %v; want null, t-1", got[0]["parent_id"], got[1]["parent_id"])
	}
	if diff := cmp.Diff([]any{}, got[0]["blocked_by"]); diff != "" {
		t.Errorf("blocked_by (-want +got):\n%s", diff)
	}
}

func TestPeekGolden(t *testing.T) {
	h := initHarness(t)
	h.ok("feature", "add", "auth")
	h.add("Set up the schema", "--id", "schema", "-p", "0")
	h.add("Login form", "--id", "login", "--blocked-by", "schema", "--feature", "auth", "-d", "Email and password.\n\nShow errors inline.")
	h.add("Session cookie", "--id", "cookie", "--blocked-by", "schema", "-p", "1")
	h.add("Docs", "--id", "docs", "-p", "3")
	h.add("Busy work", "--id", "busy", "-p", "0")
	h.add("Epic", "--id", "epic")
	h.add("Epic child", "--id", "child", "--parent", "epic")
	h.ok("task", "claim", "schema", "--agent", "agent-1")
	h.ok("task", "done", "schema", "--summary", "tables users and sessions exist")
	h.clock = t0.Add(10 * time.Minute)
	h.ok("task", "claim", "busy", "--agent", "agent-2")
	h.clock = t0.Add(13*time.Minute + 7*time.Second)

	golden(t, "peek.golden", h.ok("task", "peek"))
	golden(t, "peek-n2.golden", h.ok("task", "peek", "-n", "2"))
	golden(t, "peek-json.golden", h.ok("task", "peek", "-n", "2", "--json"))
}

func TestPeekPrintsNothingWhenNothingIsClaimable(t *testing.T) {
	h := initHarness(t)
	r := h.run("task", "peek")
	if diff := cmp.Diff(result{}, r, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("peek on an empty plan (-want +got):\n%s", diff)
	}
	h.add("Only")
	h.ok("task", "claim", "--agent", "a")
	r = h.run("task", "peek")
	if diff := cmp.Diff(result{}, r, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("peek with only active tasks (-want +got):\n%s", diff)
	}
}

func TestClaimAgent(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		flag []string
		want string
	}{
		{"flag wins", map[string]string{"RALPH_AGENT_ID": "agent-env", "USER": "u"}, []string{"--agent", "agent-flag"}, "agent-flag"},
		{"environment", map[string]string{"RALPH_AGENT_ID": "agent-env", "USER": "u"}, nil, "agent-env"},
		{"user fallback", map[string]string{"USER": "alice"}, nil, "user-alice"},
		{"logname fallback", map[string]string{"LOGNAME": "bob"}, nil, "user-bob"},
		{"nothing", map[string]string{}, nil, "user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := initHarness(t)
			h.env = tt.env
			h.add("Task")
			h.ok(append([]string{"task", "claim"}, tt.flag...)...)
			if got := h.dump().Tasks[0].ClaimedBy; got != tt.want {
				t.Errorf("claimed by %q, want %q", got, tt.want)
			}
		})
	}
}

func TestClaimLease(t *testing.T) {
	h := initHarness(t)
	h.add("Task")
	h.ok("task", "claim", "--agent", "a", "--lease", "1m")
	if got := h.dump().Tasks[0].LeaseExpiresAt; !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("lease expires at %v, want %v", got, t0.Add(time.Minute))
	}
}

func TestReadCommandsRecoverExpiredLeases(t *testing.T) {
	for _, cmd := range [][]string{{"task", "list"}, {"task", "peek"}, {"task", "plan-status"}, {"task", "show", "t-1"}, {"task", "export"}} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			h := initHarness(t)
			h.add("Task")
			h.ok("task", "claim", "--agent", "agent-dead", "--lease", "1m")
			h.clock = t0.Add(2 * time.Minute)
			h.ok(cmd...)
			// Read what the command left, at a time when the lease would
			// still be valid, so that dump itself recovers nothing.
			h.clock = t0
			s := h.dump()
			if s.Tasks[0].Status != "pending" {
				t.Fatalf("status after %v = %s, want pending", cmd, s.Tasks[0].Status)
			}
			logs := s.Logs["t-1"]
			last := logs[len(logs)-1]
			if last.Kind != "lease-expired" || !strings.Contains(last.Message, "agent-dead") {
				t.Errorf("last log = %+v, want a lease-expired entry naming agent-dead", last)
			}
		})
	}
}

func TestImportExport(t *testing.T) {
	h := initHarness(t)
	h.write("plan.jsonl", `{"id":"a","title":"First","description":"d","priority":1,"parent":null,"blocked_by":["b"],"status":"pending"}
{"id":"b","title":"Second","parent":""}
{"id":"c","title":"Third","parent":"a","status":"done"}
{"id":"d","title":"Fourth","status":"in_progress","feature":"auth"}
`)
	h.ok("feature", "add", "auth")
	if diff := cmp.Diff("imported 4 tasks\n", h.ok("task", "import", h.dir+"/plan.jsonl")); diff != "" {
		t.Errorf("import (-want +got):\n%s", diff)
	}
	want := `{"id":"a","title":"First","description":"d","priority":1,"parent":null,"blocked_by":["b"],"status":"pending"}
{"id":"b","title":"Second","description":"","priority":2,"parent":null,"blocked_by":[],"status":"pending"}
{"id":"c","title":"Third","description":"","priority":2,"parent":"a","blocked_by":[],"status":"done"}
{"id":"d","title":"Fourth","description":"","priority":2,"parent":null,"blocked_by":[],"status":"pending","feature":"auth"}
`
	exported := h.ok("task", "export")
	if diff := cmp.Diff(want, exported); diff != "" {
		t.Errorf("export (-want +got):\n%s", diff)
	}

	// Round trip through standard input into a fresh project.
	h2 := initHarness(t)
	h2.ok("feature", "add", "auth")
	h2.stdin = exported
	h2.ok("task", "import", "-")
	if diff := cmp.Diff(want, h2.ok("task", "export")); diff != "" {
		t.Errorf("export after re-import (-want +got):\n%s", diff)
	}
}

func TestImportChecklist(t *testing.T) {
	h := initHarness(t)
	h.add("Already there")
	h.write("progress.md", `# Progress: shop

## Status
In Progress

## Tasks
### Phase 1: Setup
- [x] Create the repo
- [ ] Add CI
  runs go test
  - [ ] Nested step <!-- id: T-9 -->

### Phase 2: Build
- [x] Cart
* [X] Checkout

## Completed This Iteration
- [x] Create the repo
`)
	if diff := cmp.Diff("imported 7 tasks\n", h.ok("task", "import", h.dir+"/progress.md")); diff != "" {
		t.Errorf("import (-want +got):\n%s", diff)
	}
	want := `{"id":"t-1","title":"Already there","description":"","priority":2,"parent":null,"blocked_by":[],"status":"pending"}
{"id":"phase-1","title":"Setup","description":"","priority":2,"parent":null,"blocked_by":[],"status":"pending"}
{"id":"create-the-repo","title":"Create the repo","description":"","priority":2,"parent":"phase-1","blocked_by":[],"status":"done"}
{"id":"add-ci","title":"Add CI","description":"runs go test","priority":2,"parent":"phase-1","blocked_by":[],"status":"pending"}
{"id":"T-9","title":"Nested step","description":"","priority":2,"parent":"phase-1","blocked_by":[],"status":"pending"}
{"id":"phase-2","title":"Build","description":"","priority":2,"parent":null,"blocked_by":[],"status":"done"}
{"id":"cart","title":"Cart","description":"","priority":2,"parent":"phase-2","blocked_by":[],"status":"done"}
{"id":"checkout","title":"Checkout","description":"","priority":2,"parent":"phase-2","blocked_by":[],"status":"done"}
`
	if diff := cmp.Diff(want, h.ok("task", "export")); diff != "" {
		t.Errorf("export (-want +got):\n%s", diff)
	}
	// A checklist imports idempotently (issue 5): the same list again adds
	// nothing and changes nothing.
	before := h.dump()
	if diff := cmp.Diff("imported 0 tasks (7 already present)\n", h.ok("task", "import", h.dir+"/progress.md")); diff != "" {
		t.Errorf("second import (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("second import changed the database (-before +after):\n%s", diff)
	}
}

// TestImportChecklistAddsOnlyWhatIsNew: a longer version of a list adds
// only its new items; an item whose title is already a task is that task
// (its children hang under it), and --dry-run says so and changes nothing.
func TestImportChecklistAddsOnlyWhatIsNew(t *testing.T) {
	h := initHarness(t)
	h.add("Polish") // t-1, matched by title below
	h.write("v1.md", "# Plan\n\n### Phase 1: Setup\n- [ ] Create the repo\n")
	h.ok("task", "import", h.dir+"/v1.md")
	h.write("v2.md", `# Plan

### Phase 1: Setup
- [ ] Create the repo
- [ ] Add CI

### Phase 2: Polish
- [ ] Shine
`)
	before := h.dump()
	wantDry := `would add add-ci Add CI [pending] (parent phase-1)
would add shine Shine [pending] (parent t-1)
would import 2 tasks (3 already present); nothing changed
`
	if diff := cmp.Diff(wantDry, h.ok("task", "import", "--dry-run", h.dir+"/v2.md")); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("dry run changed the database (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff("imported 2 tasks (3 already present)\n", h.ok("task", "import", h.dir+"/v2.md")); diff != "" {
		t.Errorf("import (-want +got):\n%s", diff)
	}
	want := `{"id":"t-1","title":"Polish","description":"","priority":2,"parent":null,"blocked_by":[],"status":"pending"}
{"id":"phase-1","title":"Setup","description":"","priority":2,"parent":null,"blocked_by":[],"status":"pending"}
{"id":"create-the-repo","title":"Create the repo","description":"","priority":2,"parent":"phase-1","blocked_by":[],"status":"pending"}
{"id":"add-ci","title":"Add CI","description":"","priority":2,"parent":"phase-1","blocked_by":[],"status":"pending"}
{"id":"shine","title":"Shine","description":"","priority":2,"parent":"t-1","blocked_by":[],"status":"pending"}
`
	if diff := cmp.Diff(want, h.ok("task", "export")); diff != "" {
		t.Errorf("export (-want +got):\n%s", diff)
	}
}

// TestImportJSONLStaysStrict: JSON Lines are all or nothing: a
// known id is an error naming the line, not a skip.
func TestImportJSONLStaysStrict(t *testing.T) {
	h := initHarness(t)
	h.write("a.jsonl", `{"id":"a","title":"A","description":"","priority":2,"parent":null,"blocked_by":[],"status":"pending"}
`)
	h.ok("task", "import", h.dir+"/a.jsonl")
	before := h.dump()
	r := h.run("task", "import", h.dir+"/a.jsonl")
	if r.code != 1 || !strings.Contains(r.stderr, "line 1") || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("second JSONL import = %+v, want exit 1 naming line 1 and the duplicate id", r)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("failed import changed the database (-before +after):\n%s", diff)
	}
}

func TestImportNothing(t *testing.T) {
	h := initHarness(t)
	h.write("empty.jsonl", "\n\n")
	r := h.run("task", "import", h.dir+"/empty.jsonl")
	if r.code != 2 || !strings.Contains(r.stderr, "no tasks to import") {
		t.Errorf("import of an empty file = %+v, want exit 2", r)
	}
}

func TestFeatures(t *testing.T) {
	h := initHarness(t)
	spec := h.write("specs/auth.md", "# Auth\nLog people in.\n")
	if diff := cmp.Diff(".ralph/features/auth/spec.md\n.ralph/features/auth/plan.md\n", h.ok("feature", "add", "auth", "--spec", spec)); diff != "" {
		t.Errorf("feature add (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("# Auth\nLog people in.\n", h.read(".ralph/features/auth/spec.md")); diff != "" {
		t.Errorf("spec.md (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("# Plan: auth\n", h.read(".ralph/features/auth/plan.md")); diff != "" {
		t.Errorf("plan.md (-want +got):\n%s", diff)
	}
	h.ok("feature", "add", "billing")
	want := "NAME     SPEC                             PLAN\n" +
		"auth     .ralph/features/auth/spec.md     .ralph/features/auth/plan.md\n" +
		"billing  .ralph/features/billing/spec.md  .ralph/features/billing/plan.md\n"
	if diff := cmp.Diff(want, h.ok("feature", "list")); diff != "" {
		t.Errorf("feature list (-want +got):\n%s", diff)
	}
	h.add("Login", "--feature", "auth")
	h.add("Invoice", "--feature", "billing")
	if diff := cmp.Diff("ID   STATUS   PRI  TITLE\nt-1  pending  2    Login\n", h.ok("task", "list", "--feature", "auth")); diff != "" {
		t.Errorf("list --feature (-want +got):\n%s", diff)
	}
	var fl []map[string]any
	if err := json.Unmarshal([]byte(h.ok("feature", "list", "--json")), &fl); err != nil || len(fl) != 2 || fl[0]["name"] != "auth" {
		t.Errorf("feature list --json = %v (%v)", fl, err)
	}
}

// TestFlagsAfterPositionals runs every command shape with its flags after
// its positional arguments, and checks the flags took effect.
func TestFlagsAfterPositionals(t *testing.T) {
	h := initHarness(t)
	spec := h.write("s.md", "spec\n")
	h.ok("feature", "add", "f1", "--spec", spec)
	if got := h.read(".ralph/features/f1/spec.md"); got != "spec\n" {
		t.Errorf("feature add NAME --spec: spec.md = %q", got)
	}
	h.add("Blocker", "--id", "b")
	if got := h.add("Fix login", "-d", "the form", "--priority", "1", "--blocked-by", "b", "--feature", "f1", "--id", "x"); got != "x" {
		t.Fatalf("add printed %q", got)
	}
	tk := h.dump().Tasks[1]
	if tk.Description != "the form" || tk.Priority != 1 || tk.Feature != "f1" || len(tk.BlockedBy) != 1 {
		t.Errorf("add TITLE flags…: task = %+v", tk)
	}
	if !strings.HasPrefix(h.ok("task", "show", "x", "--json"), "{") {
		t.Error("show ID --json did not print JSON")
	}
	h.ok("task", "claim", "b", "--agent", "a1", "--lease", "1m")
	if got := h.dump().Tasks[0]; got.ClaimedBy != "a1" || !got.LeaseExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("claim ID --agent --lease: task = %+v", got)
	}
	h.ok("task", "done", "b", "--summary", "all good")
	if logs := h.dump().Logs["b"]; logs[len(logs)-1].Message != "all good" {
		t.Errorf("done ID --summary: logs = %+v", logs)
	}
	h.ok("task", "block", "x", "--reason", "wait for Bob")
	if logs := h.dump().Logs["x"]; logs[len(logs)-1].Message != "wait for Bob" {
		t.Errorf("block ID --reason: logs = %+v", logs)
	}
	h.ok("task", "unblock", "x")
	h.ok("task", "claim", "x", "--agent", "a2")
	h.ok("task", "fail", "x", "--reason", "broken")
	if logs := h.dump().Logs["x"]; logs[len(logs)-1].Message != "broken" {
		t.Errorf("fail ID --reason: logs = %+v", logs)
	}
	h.ok("task", "list", "--status", "failed", "--json")
	if got := h.ok("task", "list", "--json", "--status", "done"); !strings.Contains(got, `"id": "b"`) || strings.Contains(got, `"id": "x"`) {
		t.Errorf("list --json --status done = %s", got)
	}
	if got := h.ok("task", "peek", "--json", "-n", "1"); !strings.HasPrefix(got, "{") {
		t.Errorf("peek --json -n 1 = %q", got)
	}
	if got := h.ok("task", "plan-status", "--json"); !strings.HasPrefix(got, "{") {
		t.Errorf("plan-status --json = %q", got)
	}
	// Global --dir after the command.
	r := h.run("task", "list", "--dir", h.dir)
	if r.code != 0 {
		t.Errorf("task list --dir DIR: %+v", r)
	}
}

func TestImportParentAfterChild(t *testing.T) {
	h := initHarness(t)
	h.write("plan.jsonl", `{"id":"a","title":"Child one","parent":"epic"}
{"id":"b","title":"Grandchild","parent":"c"}
{"id":"c","title":"Child two","parent":"epic"}
{"id":"epic","title":"Epic"}
`)
	h.ok("task", "import", h.dir+"/plan.jsonl")
	want := `{"id":"epic","title":"Epic","description":"","priority":2,"parent":null,"blocked_by":[],"status":"pending"}
{"id":"a","title":"Child one","description":"","priority":2,"parent":"epic","blocked_by":[],"status":"pending"}
{"id":"c","title":"Child two","description":"","priority":2,"parent":"epic","blocked_by":[],"status":"pending"}
{"id":"b","title":"Grandchild","description":"","priority":2,"parent":"c","blocked_by":[],"status":"pending"}
`
	if diff := cmp.Diff(want, h.ok("task", "export")); diff != "" {
		t.Errorf("export (-want +got):\n%s", diff)
	}
}

// BenchmarkPeek runs `ralph task peek -n 10` in-process on a plan of 10,000
// tasks shaped like scripts/bench-peek.sh's (30% with a blocker, 10% with a
// parent, priorities 0..4): the CLI's share of the whole-process figure.
func BenchmarkPeek(b *testing.B) {
	dir := b.TempDir()
	var plan strings.Builder
	rnd := uint64(42)
	next := func(n uint64) uint64 { // xorshift: reproducible, no math/rand state
		rnd ^= rnd << 13
		rnd ^= rnd >> 7
		rnd ^= rnd << 17
		return rnd % n
	}
	const n = 10000
	for i := 1; i <= n; i++ {
		blk, par := "", "null"
		if i > 1 && next(10) < 3 {
			blk = fmt.Sprintf(`"t%d"`, 1+next(uint64(i-1)))
		}
		if i < n && next(10) < 1 {
			par = fmt.Sprintf(`"t%d"`, uint64(i+1)+next(uint64(n-i)))
		}
		fmt.Fprintf(&plan, `{"id":"t%d","title":"Task %d","priority":%d,"parent":%s,"blocked_by":[%s]}`+"\n", i, i, next(5), par, blk)
	}
	var out, errb strings.Builder
	cfg := appConfig{stdout: &out, stderr: &errb, stdin: strings.NewReader(plan.String()), getenv: func(string) string { return "" }, now: time.Now}
	for _, args := range [][]string{{"init"}, {"task", "import", "-"}} {
		if code := runApp(b.Context(), newAppConfig(cfg), append([]string{"ralph", "--dir", dir}, args...), &errb); code != 0 {
			b.Fatalf("ralph %v: exit %d: %s", args, code, errb.String())
		}
	}
	for b.Loop() {
		out.Reset()
		if code := runApp(b.Context(), newAppConfig(cfg), []string{"ralph", "--dir", dir, "task", "peek", "-n", "10"}, &errb); code != 0 {
			b.Fatalf("peek: exit %d: %s", code, errb.String())
		}
	}
	if !strings.Contains(out.String(), "# Claimable tasks (10)") {
		b.Fatalf("peek printed:\n%s", out.String())
	}
}

// TestWhoMayMoveTask: an agent moves only what it holds; a person may move
// any task, one a live agent holds only with --force; and the history says
// who did what.
func TestWhoMayMoveTask(t *testing.T) {
	h := initHarness(t)
	h.add("Held by a")
	h.add("Held by a live loop's agent")
	h.ok("task", "claim", "t-1", "--agent", "agent-a")
	h.env["RALPH_HOLDER"] = loop.ThisProcess().String() // a live loop: this test
	h.ok("task", "claim", "t-2", "--agent", "agent-a")
	delete(h.env, "RALPH_HOLDER")

	for _, cmd := range [][]string{{"task", "done", "t-1"}, {"task", "fail", "t-1", "--reason", "no"}} {
		h.env["RALPH_AGENT_ID"] = "agent-b"
		r := h.run(cmd...)
		if r.code != 1 || !strings.Contains(r.stderr, "held by agent-a") {
			t.Errorf("%v by agent-b: exit %d, stderr %q; want 1 naming the holder", cmd, r.code, r.stderr)
		}
		delete(h.env, "RALPH_AGENT_ID")
		if r := h.run(append(cmd, "--agent", "agent-b")...); r.code != 1 || !strings.Contains(r.stderr, "held by agent-a") {
			t.Errorf("%v --agent agent-b: exit %d, stderr %q; want 1 naming the holder", cmd, r.code, r.stderr)
		}
	}
	if got := h.dump().Tasks; got[0].Status != loop.StatusInProgress || got[1].Status != loop.StatusInProgress {
		t.Fatalf("refused moves changed the tasks: %v, %v", got[0].Status, got[1].Status)
	}
	// A person may finish a task claimed by hand, but needs --force for one
	// a live agent holds.
	h.ok("task", "done", "t-1", "--summary", "finished by hand")
	if r := h.run("task", "done", "t-2"); r.code != 1 || !strings.Contains(r.stderr, "--force") || !strings.Contains(r.stderr, "agent-a") {
		t.Errorf("person's done of a live agent's task: exit %d, stderr %q; want 1 naming the holder and --force", r.code, r.stderr)
	}
	h.ok("task", "done", "t-2", "--force")

	type entry struct{ Kind, Actor string }
	for id, want := range map[string][]entry{
		"t-1": {{"claim", "agent-a"}, {"done", "user-tester"}},
		"t-2": {{"claim", "agent-a"}, {"done", "user-tester"}}, // a completion without a summary is logged too
	} {
		var got []entry
		for _, l := range h.dump().Logs[id] {
			got = append(got, entry{l.Kind, l.Actor})
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s history (-want +got):\n%s", id, diff)
		}
	}
}

// TestAgentCannotTakeLoopClaim: inside a session of a loop that claimed a
// task for it, the agent can neither finish, release nor re-claim that
// task through ralph's commands — the way round verification and gates that
// a release, a claim of its own and a done would be — and claims nothing
// else.
func TestAgentCannotTakeLoopClaim(t *testing.T) {
	h := initHarness(t)
	h.add("The loop's task")
	h.add("Another")
	st, err := dag.OpenExisting(t.Context(), filepath.Join(h.dir, ".ralph", "progress.db"), dag.Options{Now: func() time.Time { return h.clock }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Claim(t.Context(), loop.ClaimParams{TaskID: "t-1", Agent: "agent-a", Holder: loop.ThisProcess(), Mode: loop.ClaimLoop})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	h.env["RALPH_AGENT_ID"] = "agent-a"
	h.env["RALPH_TASK_ID"] = "t-1"
	h.env["RALPH_HOLDER"] = loop.ThisProcess().String()
	for _, cmd := range [][]string{{"task", "done", "t-1"}, {"task", "fail", "t-1", "--reason", "x"}, {"task", "claim", "t-2"}, {"task", "claim"}} {
		if r := h.run(cmd...); r.code != 1 || !strings.Contains(r.stderr, "<task-done>t-1</task-done>") {
			t.Errorf("%v in the loop's session: exit %d, stderr %q; want 1 telling the agent to answer with the sigil", cmd, r.code, r.stderr)
		}
	}
	if out := h.ok("task", "release"); out != "" {
		t.Errorf("task release released %q: the loop's claim is the loop's", out)
	}
	got := h.dump().Tasks
	if got[0].Status != loop.StatusInProgress || got[0].ClaimedBy != "agent-a" || got[1].Status != loop.StatusPending {
		t.Errorf("tasks after the agent's attempts: t-1 %s by %q, t-2 %s", got[0].Status, got[0].ClaimedBy, got[1].Status)
	}
}

// TestClaimTakesTheCriticalPath: with equal priorities, `task peek` and
// `task claim` take the head of the longest chain of work before older
// tasks nothing waits for (DESIGN §17), on a plan `task import` made.
func TestClaimTakesTheCriticalPath(t *testing.T) {
	h := initHarness(t)
	plan := h.write("plan.jsonl", `{"id":"w1","title":"Wide 1"}
{"id":"w2","title":"Wide 2"}
{"id":"c1","title":"Chain 1"}
{"id":"c2","title":"Chain 2","blocked_by":["c1"]}
{"id":"c3","title":"Chain 3","blocked_by":["c2"]}
`)
	h.ok("task", "import", plan)
	claimable := func() []string {
		var peek struct {
			Claimable []struct {
				ID string `json:"id"`
			} `json:"claimable"`
		}
		if err := json.Unmarshal([]byte(h.ok("task", "peek", "--json")), &peek); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range peek.Claimable {
			ids = append(ids, c.ID)
		}
		return ids
	}
	if diff := cmp.Diff([]string{"c1", "w1", "w2"}, claimable()); diff != "" {
		t.Errorf("peek (-want +got):\n%s", diff)
	}
	if out := h.ok("task", "claim", "--agent", "a"); !strings.Contains(out, "c1") {
		t.Errorf("task claim took %q, want c1 (the head of the chain of three)", out)
	}
	if diff := cmp.Diff([]string{"w1", "w2"}, claimable()); diff != "" {
		t.Errorf("peek after claiming c1 (-want +got):\n%s", diff)
	}
}

// TestImportBeadsList: `bd list --json` (beads 1.x), read from a file and
// from standard input, imports as bd export does; a list that leaves out
// an issue its tasks name (bd list without --all leaves the closed ones
// out) changes nothing and says what to import instead.
func TestImportBeadsList(t *testing.T) {
	list, err := os.ReadFile("../../dag/testdata/beads1/bd-list-all.json")
	if err != nil {
		t.Fatal(err)
	}
	h := initHarness(t)
	h.write("list.json", string(list))
	if diff := cmp.Diff("imported 9 tasks\n", h.ok("task", "import", h.dir+"/list.json")); diff != "" {
		t.Errorf("import (-want +got):\n%s", diff)
	}
	h2 := initHarness(t)
	h2.stdin = string(list)
	h2.ok("task", "import", "-")
	if diff := cmp.Diff(h.ok("task", "export"), h2.ok("task", "export")); diff != "" {
		t.Errorf("from standard input (-file +stdin):\n%s", diff)
	}

	h3 := initHarness(t)
	h3.write("open.json", `[
  {"id": "o-2", "title": "Login form", "status": "open", "priority": 2, "issue_type": "feature",
   "dependencies": [{"issue_id": "o-2", "depends_on_id": "o-1", "type": "blocks"}]}
]
`)
	r := h3.run("task", "import", h3.dir+"/open.json")
	if r.code != 1 || !strings.Contains(r.stderr, "blocker o-1 does not exist") || !strings.Contains(r.stderr, "bd list --json --all") {
		t.Errorf("a partial list: exit %d, %q; want 1, the missing blocker and what to import instead", r.code, r.stderr)
	}
	if got := h3.ok("task", "export"); got != "" {
		t.Errorf("a refused import left: %q", got)
	}
}
