package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

// listPlan builds a small plan with what list prints in every form: a
// parent, blockers, a claim, a failed and a blocked task, a negative
// priority, a wide id with non-ASCII letters, and titles and descriptions
// that need escaping in JSON.
func listPlan(t *testing.T) *harness {
	h := initHarness(t)
	h.add("Blocker \"one\"", "--id", "b1", "-d", "line\nbreak\ttab <html> & \u2028 é \x01")
	h.add("Epic", "--id", "epic", "--priority", "-1")
	h.add("Child  with   spaces", "--id", "ünïcode-child", "--parent", "epic", "--blocked-by", "b1")
	h.ok("task", "dep", "add", "epic", "b1")
	h.add("Second blocker", "--id", "b2", "--priority", "12")
	h.ok("task", "dep", "add", "ünïcode-child", "b2")
	h.add("Held", "--id", "held")
	h.ok("task", "claim", "held", "--agent", "agent-7")
	h.add("Doomed", "--id", "doomed")
	h.ok("task", "claim", "doomed", "--agent", "agent-8")
	h.ok("task", "fail", "doomed", "--agent", "agent-8", "--reason", "no")
	h.add("Waiting", "--id", "w")
	h.ok("task", "block", "w")
	return h
}

// TestTaskListJSONBytes: the streamed `task list --json` is byte for byte
// what encoding/json printed for the whole list before it streamed, for
// every task and for a 3-task prefix (pinned in a golden file), and an
// empty list is still "[]".
func TestTaskListJSONBytes(t *testing.T) {
	h := listPlan(t)
	tasks := h.dump().Tasks
	var want bytes.Buffer
	if err := writeJSON(&want, tasksJSON(tasks)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.String(), h.ok("task", "list", "--json")); diff != "" {
		t.Errorf("list --json (-encoding/json +streamed):\n%s", diff)
	}
	want.Reset()
	if err := writeJSON(&want, tasksJSON(tasks[:3])); err != nil {
		t.Fatal(err)
	}
	got := h.ok("task", "list", "--json", "--limit", "3")
	if diff := cmp.Diff(want.String(), got); diff != "" {
		t.Errorf("list --json --limit 3 (-encoding/json +streamed):\n%s", diff)
	}
	golden(t, "list-json-3.golden", got)
	if diff := cmp.Diff("[]\n", h.ok("task", "list", "--json", "--status", "done")); diff != "" {
		t.Errorf("empty list --json (-want +got):\n%s", diff)
	}
}

// tabwriterTable is how `task list` printed its table before it streamed:
// text/tabwriter over every row.
func tabwriterTable(tasks []loop.Task) string {
	if len(tasks) == 0 {
		return ""
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPRI\tTITLE")
	for _, t := range tasks {
		var extra []string
		if t.ParentID != "" {
			extra = append(extra, "parent "+t.ParentID)
		}
		if len(t.BlockedBy) > 0 {
			extra = append(extra, "after "+strings.Join(t.BlockedBy, ","))
		}
		if t.ClaimedBy != "" {
			extra = append(extra, "by "+t.ClaimedBy)
		}
		title := strings.Join(strings.Fields(t.Title), " ")
		if len(extra) > 0 {
			title += "  (" + strings.Join(extra, "; ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.ID, t.Status, t.Priority, title)
	}
	tw.Flush()
	return b.String()
}

// TestTaskListTable: the streamed table, sized from the listing's shape,
// is what text/tabwriter made of the whole list, under filters and limits.
func TestTaskListTable(t *testing.T) {
	h := listPlan(t)
	tasks := h.dump().Tasks
	for _, tt := range []struct {
		args []string
		want []loop.Task
	}{
		{nil, tasks},
		{[]string{"--limit", "2"}, tasks[:2]},
		{[]string{"--limit", "0"}, tasks},
		{[]string{"--limit", "100"}, tasks},
		{[]string{"--status", "in_progress"}, []loop.Task{tasks[4]}},
		{[]string{"--status", "done"}, nil},
	} {
		got := h.ok(append([]string{"task", "list"}, tt.args...)...)
		if diff := cmp.Diff(tabwriterTable(tt.want), got); diff != "" {
			t.Errorf("list %v (-tabwriter +streamed):\n%s", tt.args, diff)
		}
	}
	r := h.run("task", "list", "--limit", "-1")
	if r.code != 1 || !strings.Contains(r.stderr, "--limit -1") {
		t.Errorf("list --limit -1 = %+v, want a usage error", r)
	}
}

// failingWriter accepts limit bytes, then fails every write; it counts
// what it was asked to write.
type failingWriter struct {
	limit, asked, calls int
}

var errClosed = errors.New("reader closed the pipe")

func (w *failingWriter) Write(p []byte) (int, error) {
	w.calls++
	w.asked += len(p)
	if w.asked > w.limit {
		return 0, errClosed
	}
	return len(p), nil
}

// TestTaskListStopsOnWriteError: when standard output fails part way (a
// closed pipe), list stops reading at once — no write is attempted after
// the failed one — exits 1 naming the error, and changes nothing.
func TestTaskListStopsOnWriteError(t *testing.T) {
	h := initHarness(t)
	var plan strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&plan, `{"id":"t%d","title":"Task %d with a title long enough to fill buffers","blocked_by":[%s]}`+"\n",
			i, i, map[bool]string{true: `"t0"`, false: ""}[i > 0 && i%3 == 0])
	}
	h.stdin = plan.String()
	h.ok("task", "import", "-")
	before := h.dump()
	for _, args := range [][]string{{"task", "list", "--json"}, {"task", "list"}} {
		w := &failingWriter{limit: 100 << 10}
		var errb bytes.Buffer
		cfg := h.config(nil, &errb)
		cfg.stdout = w
		code := runApp(t.Context(), newAppConfig(cfg), append([]string{"ralph", "--dir", h.dir}, args...), &errb)
		if code != 1 || !strings.Contains(errb.String(), errClosed.Error()) {
			t.Errorf("%v on a failing writer: exit %d, stderr %q", args, code, errb.String())
		}
		// The first failing write is the last: the buffered writer keeps
		// its error and the listing stops.
		if w.asked > w.limit+64<<10 || w.asked <= w.limit {
			t.Errorf("%v: asked to write %d bytes of a writer that fails after %d", args, w.asked, w.limit)
		}
		if diff := cmp.Diff(before, h.dump()); diff != "" {
			t.Errorf("%v changed the database (-before +after):\n%s", args, diff)
		}
	}
}

// TestAppendJSONString: the streamed list's string encoder writes what
// encoding/json writes (HTML escaping off) for control characters, quotes,
// invalid UTF-8, line and paragraph separators and random bytes.
func TestAppendJSONString(t *testing.T) {
	cases := []string{"", "plain", `"quoted" \back\`, "\b\f\n\r\t\x00\x1f\x7f", "<>&", "\u2028\u2029",
		"é ü 日本 🙂", "\xff\xfe bad", "a\xc3", "\xed\xa0\x80 surrogate"}
	r := rand.New(rand.NewPCG(7, 9))
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		got := string(appendJSONString(nil, s)) + "\n"
		if got != want.String() {
			t.Errorf("appendJSONString(%q) = %s, encoding/json %s", s, got, want.String())
		}
	}
}
