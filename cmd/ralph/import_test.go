package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bigPlan is n tasks as JSON Lines, with blockers and parents further down
// the file, the shape of scripts/bench-bigplans.sh's plans.
func bigPlan(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		blk, par := "", "null"
		if i > 1 && i%3 == 0 {
			blk = fmt.Sprintf(`"t%d"`, i/2)
		}
		if i < n && i%10 == 0 {
			par = fmt.Sprintf(`"t%d"`, i+1+(i*7)%(n-i))
		}
		fmt.Fprintf(&b, `{"id":"t%d","title":"Task %d","description":"","priority":%d,"parent":%s,"blocked_by":[%s],"status":"pending"}`+"\n", i, i, i%5, par, blk)
	}
	return b.String()
}

// TestImportBadLastLine: a bad line at the very end of a long file (read
// twice, the first pass checking everything) is refused naming it, and
// the database is as it was.
func TestImportBadLastLine(t *testing.T) {
	h := initHarness(t)
	h.add("Already there", "--id", "old")
	plan := bigPlan(2000)
	before := h.dump()
	for _, tt := range []struct{ name, last, want string }{
		{"bad JSON", `{"id":"x","title":"x",`, "line 2001: invalid JSON"},
		{"missing parent", `{"id":"x","title":"x","parent":"nope"}`, "line 2001: task x: parent nope does not exist"},
		{"existing id", `{"id":"old","title":"x"}`, "line 2001: task old"},
		{"cycle", `{"id":"x","title":"x","parent":"t5","blocked_by":["t5"]}`, "cycle"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h.write("plan.jsonl", plan+tt.last+"\n")
			r := h.run("task", "import", h.dir+"/plan.jsonl")
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
				t.Errorf("import = %+v, want exit 1 naming %q", r, tt.want)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("a refused import changed the database (-before +after):\n%s", diff)
			}
		})
	}
	h.write("plan.jsonl", plan)
	if got := h.ok("task", "import", h.dir+"/plan.jsonl"); got != "imported 2000 tasks\n" {
		t.Errorf("import = %q", got)
	}
}

// TestImportFromPipe: standard input that cannot seek (a pipe) is copied
// aside and read twice like a file; nothing of it stays in the temporary
// directory.
func TestImportFromPipe(t *testing.T) {
	h := initHarness(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out, errb bytes.Buffer
	cfg := h.config(&out, &errb)
	cfg.stdin = struct{ io.Reader }{strings.NewReader("\n  \n" + bigPlan(300))}
	code := runApp(t.Context(), newAppConfig(cfg), []string{"ralph", "--dir", h.dir, "task", "import", "-"}, &errb)
	if code != 0 || out.String() != "imported 300 tasks\n" {
		t.Fatalf("import - from a pipe: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if got := len(h.dump().Tasks); got != 300 {
		t.Errorf("%d tasks after the import, want 300", got)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the import left %v in the temporary directory", left)
	}
}

// TestImportDryRunJSONL: a JSON Lines dry run prints the tasks in the
// order they would be inserted (parents first), checks what the import
// checks, and changes nothing.
func TestImportDryRunJSONL(t *testing.T) {
	h := initHarness(t)
	h.write("plan.jsonl", `{"id":"a","title":"Child","parent":"epic","blocked_by":["b","b"]}
{"id":"b","title":"Blocker","status":"done"}
{"id":"epic","title":"Epic","status":"in_progress"}
`)
	before := h.dump()
	want := `would add epic Epic [pending]
would add a Child [pending] (parent epic) (after b)
would add b Blocker [done]
would import 3 tasks; nothing changed
`
	if diff := cmp.Diff(want, h.ok("task", "import", "--dry-run", h.dir+"/plan.jsonl")); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("a dry run changed the database (-before +after):\n%s", diff)
	}
	h.write("bad.jsonl", `{"id":"a","title":"Child","parent":"nope"}`+"\n")
	if r := h.run("task", "import", "--dry-run", h.dir+"/bad.jsonl"); r.code != 1 || !strings.Contains(r.stderr, "line 1: task a: parent nope does not exist") {
		t.Errorf("dry run of a bad plan = %+v, want the import's error", r)
	}
}
