package main

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/claude/claudetest"
	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
)

// These tests run `ralph build --sandbox` with the stand-in agent, whose
// shell payload plays a sandboxed agent reaching the plan through
// $RALPH_BIN task …: through its broker ($RALPH_SOCKET), as itself, and
// nothing more (ARCHITECTURE.md §7).

// attackProject is a project whose ralph runs with env, and out, a
// directory the agent's payload writes its findings to ($ATTACK_OUT): in
// the project, which a sandboxed agent may write whatever the sandbox
// does with the temp directory.
func attackProject(t *testing.T, env []string, initArgs ...string) (*e2e, string) {
	t.Helper()
	needBwrap(t)
	e := newProject(t, env, initArgs...)
	out := filepath.Join(e.dir, "attack")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "ATTACK_OUT="+out)
	return e, out
}

// secrets are what a sandboxed agent must not be given.
var secrets = []string{"GH_TOKEN=ghp_attack", "GITHUB_TOKEN=ghs_attack", "PGPASSWORD=hunter2",
	"PGPASSFILE=/nonexistent/.pgpass", "PGSERVICEFILE=/nonexistent/pg_service.conf", "RALPH_SERVE_TOKEN=serve-token",
	// another provider's keys: the agent here is Claude Code's runner
	"OPENAI_API_KEY=sk-attack", "GEMINI_API_KEY=attack-gemini"}

// checkWithheld fails the test when the environment the agent recorded
// (env(1) output) holds RALPH_DB or a secret, or lacks RALPH_SOCKET.
func checkWithheld(t *testing.T, envFile string) {
	t.Helper()
	seen := recordedEnv(t, envFile)
	for _, kv := range append(secrets, "RALPH_DB=") {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := seen[k]; ok {
			t.Errorf("the sandboxed agent was given %s=%s", k, v)
		}
	}
	if !strings.HasPrefix(seen["RALPH_SOCKET"], "/") {
		t.Errorf("the sandboxed agent got no RALPH_SOCKET (%q)", seen["RALPH_SOCKET"])
	}
}

// recordedEnv reads an environment the agent recorded (env(1) output).
func recordedEnv(t *testing.T, envFile string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatalf("the agent's environment was not recorded: %v", err)
	}
	seen := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			seen[k] = v
		}
	}
	return seen
}

// TestAttackBrokerPeekMode: `ralph build --claim agent --sandbox` — the
// agent claims and completes its tasks through $RALPH_BIN, reaching the
// plan through its broker; each claim is held by the loop, each move is
// the agent's own, and the agent was given no secret.
func TestAttackBrokerPeekMode(t *testing.T) {
	e, out := attackProject(t, secrets)
	e.ok("task", "add", "First")
	e.ok("task", "add", "Second")
	agent, _ := fakeAgentPath(t, agentStep{
		Sh: `env > "$ATTACK_OUT/env-$RALPH_ITERATION"
id=$("$RALPH_BIN" task claim) && "$RALPH_BIN" task note "$id" "working on it" && "$RALPH_BIN" task done "$id" --summary "did $id"`,
		Text: "Done.",
	})
	r := e.run("build", "--claude", agent, "--claim", "agent", "--sandbox", "--max-iterations", "5")
	if r.code != 0 {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// A sandboxed fake agent cannot record its calls beside its script:
	// each session's environment, as it recorded it, tells.
	var envs []map[string]string
	for _, it := range []string{"1", "2"} {
		envs = append(envs, recordedEnv(t, filepath.Join(out, "env-"+it)))
	}
	if _, err := os.Stat(filepath.Join(out, "env-3")); err == nil {
		t.Error("a third session ran")
	}
	agentID := envs[0]["RALPH_AGENT_ID"]
	for _, id := range []string{"t-1", "t-2"} {
		task := e.show(id)
		if task.Status != "done" {
			t.Errorf("%s is %s, want done", id, task.Status)
		}
		var kinds []string
		for _, l := range task.Logs {
			kinds = append(kinds, l.Kind)
			switch l.Kind {
			case loop.LogClaim:
				if l.Actor != agentID || !strings.Contains(l.Message, "by the agent, holder ") {
					t.Errorf("%s: claim %+v, want one by %s held by its loop", id, l, agentID)
				}
			case loop.LogNote, loop.LogDone:
				if l.Actor != agentID {
					t.Errorf("%s: %s by %s, want by the agent %s", id, l.Kind, l.Actor, agentID)
				}
			}
		}
		if strings.Join(kinds, ",") != "claim,note,done" {
			t.Errorf("%s: history %v, want claim,note,done", id, kinds)
		}
	}
	for i := range envs {
		checkWithheld(t, filepath.Join(out, "env-"+strconv.Itoa(i+1)))
	}
	if envs[0]["RALPH_SOCKET"] == envs[1]["RALPH_SOCKET"] {
		t.Error("two sessions shared one socket")
	}
	if _, err := os.Stat(filepath.Dir(envs[0]["RALPH_SOCKET"])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a session's socket outlived it: %v", err)
	}
}

// TestAttackBrokerPlanMode: in `ralph plan --sandbox` the agent adds tasks
// and a dependency through its broker.
func TestAttackBrokerPlanMode(t *testing.T) {
	e, _ := attackProject(t, nil)
	if err := os.MkdirAll(filepath.Join(e.dir, "specs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "specs", "app.md"), []byte("# App\nBuild it.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agent, _ := fakeAgentPath(t, agentStep{
		Sh: `a=$("$RALPH_BIN" task add "Design" -d "the shape of it") && b=$("$RALPH_BIN" task add "Build" --blocked-by "$a") &&
c=$("$RALPH_BIN" task add "Ship" --priority 1) && "$RALPH_BIN" task dep add "$c" "$b" && "$RALPH_BIN" task list`,
		Text: "Planned. <promise>COMPLETE</promise>",
	})
	r := e.run("plan", "--claude", agent, "--sandbox")
	if r.code != 0 {
		t.Fatalf("plan: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	want := map[string][]string{"t-1": nil, "t-2": {"t-1"}, "t-3": {"t-2"}}
	for id, blockers := range want {
		task := e.show(id)
		if strings.Join(task.BlockedBy, ",") != strings.Join(blockers, ",") {
			t.Errorf("%s (%s) blocked by %v, want %v", id, task.Title, task.BlockedBy, blockers)
		}
	}
	if got := e.show("t-1").Description; got != "the shape of it" {
		t.Errorf("t-1's description %q", got)
	}
}

// attackPayload runs each command line of tries in the agent's session,
// recording its output and exit code in $ATTACK_OUT/tries.
func attackPayload(tries ...string) string {
	var b strings.Builder
	b.WriteString(`try() { echo "== $1"; sh -c "$1" 2>&1; echo "exit $?"; }` + "\n")
	for _, c := range tries {
		b.WriteString(`try ` + shQuote(c) + ` >> "$ATTACK_OUT/tries"` + "\n")
	}
	return b.String()
}

// tries reads what attackPayload recorded: each command's output and
// exit line.
func tries(t *testing.T, out string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "tries"))
	if err != nil {
		t.Fatalf("the payload recorded nothing: %v", err)
	}
	got := map[string]string{}
	for _, part := range strings.Split(string(b), "== ")[1:] {
		cmd, rest, _ := strings.Cut(part, "\n")
		got[cmd] = rest
	}
	return got
}

// TestAttackBrokerRefuses: a sandboxed agent in peek mode tries to move
// another agent's task — with --force, as a person, as that agent, by
// claiming it, by releasing it — and each is refused through its broker;
// the task stays as it was.
func TestAttackBrokerRefuses(t *testing.T) {
	e, out := attackProject(t, nil)
	e.ok("task", "add", "Mine")
	e.ok("task", "add", "Theirs")
	e.ok("task", "claim", "t-2", "--agent", "agent-other")
	before := e.show("t-2")
	cases := []struct{ cmd, says string }{
		{`"$RALPH_BIN" task done t-2 --force`, "task t-2 is held by agent-other, not agent-"},
		{`RALPH_AGENT_ID= "$RALPH_BIN" task done t-2 --force`, "refused: --force is for people"},
		{`env -u RALPH_AGENT_ID -u RALPH_HOLDER "$RALPH_BIN" task fail t-2 --force --reason x`, "refused: --force is for people"},
		{`RALPH_AGENT_ID= "$RALPH_BIN" task done t-2`, "cannot act as a person"},
		{`"$RALPH_BIN" task done t-2 --agent agent-other`, "it cannot act as agent-other"},
		{`RALPH_AGENT_ID=agent-other "$RALPH_BIN" task fail t-2 --reason mine-now`, "it cannot act as agent-other"},
		{`"$RALPH_BIN" task claim t-2`, "task t-2 is in progress: it is claimed already"},
		{`"$RALPH_BIN" task claim t-1 --agent agent-other`, "it cannot claim as agent-other"},
		{`"$RALPH_BIN" task release --agent agent-other`, "is not served to a sandboxed agent"},
		{`"$RALPH_BIN" task reset t-2`, "is not served to a sandboxed agent"},
		{`"$RALPH_BIN" --dir / --plan other task done t-2 --force`, "task t-2 is held by agent-other"},
	}
	var cmds []string
	for _, c := range cases {
		cmds = append(cmds, c.cmd)
	}
	agent, _ := fakeAgentPath(t, agentStep{Sh: attackPayload(cmds...), Text: "Tried."})
	r := e.run("build", "--claude", agent, "--claim", "agent", "--sandbox", "--once")
	if r.code != 0 {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	got := tries(t, out)
	for _, c := range cases {
		res := got[c.cmd]
		if !strings.HasSuffix(strings.TrimSpace(res), "exit 1") || !strings.Contains(res, c.says) {
			t.Errorf("%s:\n%s\nwant exit 1 saying %q", c.cmd, res, c.says)
		}
	}
	after := e.show("t-2")
	if after.Status != "in_progress" || after.ClaimedBy != "agent-other" || len(after.Logs) != len(before.Logs) {
		t.Errorf("t-2 after the attacks: %s by %s, %d log entries (was %d)", after.Status, after.ClaimedBy, len(after.Logs), len(before.Logs))
	}
}

// TestAttackBrokerVerifier: the verifier's sandboxed session reads the
// plan through its broker and can change none of it.
func TestAttackBrokerVerifier(t *testing.T) {
	e, out := attackProject(t, nil)
	// What the verifier changes in the tree is undone and voids its
	// verdict, unless git ignores it: it records its findings in an
	// ignored directory, the one place it may write that outlives it.
	commitProject(t, e.dir)
	if err := os.WriteFile(filepath.Join(out, ".gitignore"), []byte("*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.ok("task", "add", "Only")
	cases := []struct{ cmd, says string }{
		{`"$RALPH_BIN" task done {task}`, "refused: the verifier's session only reads the plan"},
		{`"$RALPH_BIN" task add "Sneaked in"`, "refused: the verifier's session only reads the plan"},
		{`"$RALPH_BIN" task note {task} "looks fine to me"`, "refused: the verifier's session only reads the plan"},
	}
	var cmds []string
	for _, c := range cases {
		cmds = append(cmds, c.cmd)
	}
	cmds = append(cmds, `"$RALPH_BIN" task show {task}`)
	// A sandboxed fake agent plays its iteration's step in both sessions:
	// the payload runs in the verifier's alone.
	agent, _ := fakeAgentPath(t, agentStep{
		Sh:   `[ -n "$FAKE_VERIFIER" ] || exit 0` + "\n" + attackPayload(cmds...),
		Text: done, VerifierText: "Checked. <verify-pass/>",
	})
	r := e.run("build", "--claude", agent, "--sandbox", "--verify")
	if r.code != 0 {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	got := tries(t, out)
	for _, c := range cases {
		cmd := strings.ReplaceAll(c.cmd, "{task}", "t-1")
		if res := got[cmd]; !strings.HasSuffix(strings.TrimSpace(res), "exit 1") || !strings.Contains(res, c.says) {
			t.Errorf("%s:\n%s\nwant exit 1 saying %q", cmd, res, c.says)
		}
	}
	if res := got[`"$RALPH_BIN" task show t-1`]; !strings.Contains(res, "title:       Only") || !strings.HasSuffix(strings.TrimSpace(res), "exit 0") {
		t.Errorf("the verifier's task show:\n%s", res)
	}
	if n := len(e.ok("task", "list", "--json")); n == 0 {
		t.Fatal("no tasks")
	}
	if got := strings.TrimSpace(e.ok("task", "plan-status")); got != "open=0 active=0 done=1 failed=0 blocked=0 total=1" {
		t.Errorf("plan-status after the run: %s", got)
	}
}

// TestAttackBrokerOtherSocket: two sandboxed agents of two builds run at
// once; each finds the other's socket and tries it: refused, while its
// own serves it.
func TestAttackBrokerOtherSocket(t *testing.T) {
	e, shared := attackProject(t, nil)
	e.ok("task", "add", "First")
	// Each agent publishes its socket, waits for the other's, tries it,
	// then its own, and waits for the other to be done before its session
	// (and socket) ends.
	payload := func(me, other string) string {
		return strings.NewReplacer("ME", me, "OTHER", other).Replace(`S="$ATTACK_OUT"
echo "$RALPH_SOCKET" > "$S/ME.sock"
i=0; while [ ! -s "$S/OTHER.sock" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
RALPH_SOCKET=$(cat "$S/OTHER.sock") "$RALPH_BIN" task plan-status > "$S/ME.other" 2>&1; echo "exit $?" >> "$S/ME.other"
"$RALPH_BIN" task plan-status > "$S/ME.own" 2>&1; echo "exit $?" >> "$S/ME.own"
touch "$S/ME.done"
i=0; while [ ! -e "$S/OTHER.done" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`)
	}
	agentA, _ := fakeAgentPath(t, agentStep{Sh: payload("a", "b"), Text: "Tried."})
	agentB, _ := fakeAgentPath(t, agentStep{Sh: payload("b", "a"), Text: "Tried."})
	var wg sync.WaitGroup
	results := make([]e2eResult, 2)
	for i, agent := range []string{agentA, agentB} {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, e.bin, "build", "--claude", agent, "--claim", "agent", "--sandbox", "--once")
			cmd.Dir, cmd.Env = e.dir, e.env
			var so, se bytes.Buffer
			cmd.Stdout, cmd.Stderr = &so, &se
			err := cmd.Run()
			var ee *exec.ExitError
			code := 0
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				code = -1
			}
			results[i] = e2eResult{code: code, stdout: so.String(), stderr: se.String()}
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("build %d: exit %d\nstdout:\n%s\nstderr:\n%s", i+1, r.code, r.stdout, r.stderr)
		}
	}
	for _, me := range []string{"a", "b"} {
		other, _ := os.ReadFile(filepath.Join(shared, me+".other"))
		if !strings.Contains(string(other), "refused: the connecting process") || !strings.HasSuffix(strings.TrimSpace(string(other)), "exit 1") {
			t.Errorf("agent %s on the other agent's socket:\n%s", me, other)
		}
		own, _ := os.ReadFile(filepath.Join(shared, me+".own"))
		if !strings.HasPrefix(string(own), "open=1 active=0") || !strings.HasSuffix(strings.TrimSpace(string(own)), "exit 0") {
			t.Errorf("agent %s on its own socket:\n%s", me, own)
		}
	}
}

// TestAttackBrokerPostgres: the plan on PostgreSQL, its password in
// ralph's environment only: the sandboxed agent claims and completes
// through its broker, finds neither RALPH_DB nor PGPASSWORD, and cannot
// reach the plan without the broker.
func TestAttackBrokerPostgres(t *testing.T) {
	admin := pgtest.URL(t)
	db := pgtest.WithUser(t, admin, url.User("ralph_pw")) // the password comes from PGPASSWORD
	e, out := attackProject(t, []string{"RALPH_DB=" + db, "PGPASSWORD=secret", "GH_TOKEN=ghp_attack"})
	e.ok("task", "add", "First")
	agent, _ := fakeAgentPath(t, agentStep{
		Sh: `env > "$ATTACK_OUT/env"
env -u RALPH_SOCKET "$RALPH_BIN" task list > "$ATTACK_OUT/direct" 2>&1; echo "exit $?" >> "$ATTACK_OUT/direct"
id=$("$RALPH_BIN" task claim) && "$RALPH_BIN" task done "$id" --summary "done through the broker"`,
		Text: "Done.",
	})
	r := e.run("build", "--claude", agent, "--claim", "agent", "--sandbox", "--max-iterations", "3")
	if r.code != 0 {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	env, err := os.ReadFile(filepath.Join(out, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"RALPH_DB=", "PGPASSWORD=", "GH_TOKEN="} {
		if strings.Contains("\n"+string(env), "\n"+k) {
			t.Errorf("the sandboxed agent was given %s…", k)
		}
	}
	// Without its broker the agent has no way in: no RALPH_DB, no
	// password, and .ralph/db.json reads empty in the sandbox.
	direct, _ := os.ReadFile(filepath.Join(out, "direct"))
	if !strings.HasSuffix(strings.TrimSpace(string(direct)), "exit 1") || strings.Contains(string(direct), "First") {
		t.Errorf("the agent reached the plan without its broker:\n%s", direct)
	}
	task := e.show("t-1")
	if task.Status != "done" || task.Logs[len(task.Logs)-1].Message != "done through the broker" {
		t.Errorf("t-1: %s, logs %+v", task.Status, task.Logs)
	}
}

// TestAttackBrokerReadOnlyFallback: an agent that cannot reach its broker
// reads the plan through a read-only open of the SQLite database in a
// read-only bind mount — its write-ahead log included, while ralph holds
// the database open with commits not yet checkpointed — and its writes
// fail saying why.
func TestAttackBrokerReadOnlyFallback(t *testing.T) {
	e, _ := attackProject(t, nil)
	e.ok("task", "add", "First")
	st, err := dag.OpenExisting(t.Context(), filepath.Join(e.dir, ".ralph", "progress.db"), dag.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Add(t.Context(), dag.AddParams{Title: "Added while open", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(e.dir, ".ralph", "progress.db-wal")); err != nil || fi.Size() == 0 {
		t.Fatalf("no write-ahead log to read: %v", err)
	}
	run := func(args ...string) e2eResult {
		cmd := exec.Command("bwrap", append([]string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--unshare-pid", "--die-with-parent", "--", e.bin, "--dir", e.dir}, args...)...)
		cmd.Env = append(e.env, "RALPH_SOCKET=/nonexistent/ralph-broker/s", "RALPH_AGENT_ID=agent-a")
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return e2eResult{code: code, stdout: so.String(), stderr: se.String()}
	}
	if r := run("task", "list"); r.code != 0 || !strings.Contains(r.stdout, "Added while open") {
		t.Errorf("task list read-only: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := run("task", "peek", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"t-2"`) {
		t.Errorf("task peek read-only: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r := run("task", "claim")
	if r.code != 1 || !strings.Contains(r.stderr, "'ralph task claim' cannot change the plan: no broker answers") {
		t.Errorf("task claim without a broker: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestAttackBrokerRealClaude is peek mode with --sandbox and the real
// Claude Code: its Bash tool runs `$RALPH_BIN task claim` and `task done`
// inside bubblewrap, through the session's broker, and the agent is given
// no secret.
func TestAttackBrokerRealClaude(t *testing.T) {
	needBwrap(t)
	e := newE2E(t, func(r claudetest.Request) claudetest.Reply {
		if !strings.Contains(r.UserText(), "You are one iteration of a ralph build loop") {
			return claudetest.Text("this is not the /ralph-build command")
		}
		results := r.ToolResultTexts()
		switch len(results) {
		case 0:
			// The project is writable in the sandbox; with TMPDIR set,
			// /tmp is not.
			return claudetest.Bash(`env > "agent-env-$RALPH_ITERATION"; "$RALPH_BIN" task claim`)
		case 1:
			id := strings.Fields(results[0])[0]
			return claudetest.Bash(`"$RALPH_BIN" task done ` + id + ` --summary "did ` + id + `"`)
		}
		id := strings.Fields(results[0])[0]
		return claudetest.Text("Claimed, did and reported " + id + ".\n<task-done>" + id + "</task-done>")
	})
	e.env = append(e.env, secrets...)
	e.ok("task", "add", "First")
	e.ok("task", "add", "Second", "--blocked-by", "t-1")

	r := e.run("build", "--claim", "agent", "--use-api-key", "--sandbox")
	if r.code != 0 {
		t.Fatalf("build --claim agent --sandbox: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := e.ok("task", "plan-status"); got != "open=0 active=0 done=2 failed=0 blocked=0 total=2\n" {
		t.Errorf("plan-status: %s", got)
	}
	for _, id := range []string{"t-1", "t-2"} {
		var kinds []string
		for _, l := range e.show(id).Logs {
			kinds = append(kinds, l.Kind)
			if l.Kind == "claim" && !strings.Contains(l.Message, "by the agent, holder ") {
				t.Errorf("%s: claim %q does not name the loop as its holder", id, l.Message)
			}
		}
		if strings.Join(kinds, ",") != "claim,done" {
			t.Errorf("%s history %v, want claim,done", id, kinds)
		}
	}
	for _, n := range []string{"1", "2"} {
		checkWithheld(t, filepath.Join(e.dir, "agent-env-"+n))
	}
}
