package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Attacks of issue 20 (items 2 and 12) run through the ralph binary: the
// stand-in agent's Sh payload plants links where ralph, on the host, opens
// files (ARCHITECTURE.md §7.2). Each test
// shows that the file outside the project — the stand-in for ~/.bashrc or
// ~/.ssh/id_rsa — is neither written nor read, and that ralph says so.

// filesBashrc is the stand-in for ~/.bashrc.
const filesBashrc = "# the user's shell start-up\nexport PATH=/usr/bin\n"

// filesOutsideHome makes a directory outside the project holding bashrc.
func filesOutsideHome(t *testing.T) (home, bashrc string) {
	t.Helper()
	home = t.TempDir()
	bashrc = filepath.Join(home, "bashrc")
	if err := os.WriteFile(bashrc, []byte(filesBashrc), 0o644); err != nil {
		t.Fatal(err)
	}
	return home, bashrc
}

// filesHomeUntouched checks that home still holds bashrc alone, unchanged.
func filesHomeUntouched(t *testing.T, home string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(home, "bashrc")); err != nil || string(b) != filesBashrc {
		t.Errorf("the file outside the project changed: %q %v", b, err)
	}
	var extra []string
	filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != home && d.Name() != "bashrc" {
			extra = append(extra, p)
		}
		return nil
	})
	if len(extra) > 0 {
		t.Errorf("files made outside the project: %v", extra)
	}
}

// filesPlant is the Sh payload that links NAME in every session directory
// of the project's logs ($RALPH_DIR: a worker's agent works in its own
// tree) to target, without replacing what is there.
func filesPlant(target string, names ...string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "for d in \"$RALPH_DIR\"/.ralph/logs/session-*/; do ln -s %s \"${d}%s\" 2>/dev/null; done; ", shQuote(target), n)
	}
	return b.String() + "true"
}

// filesSessionLogs is the text of the project's session logs.
func filesSessionLogs(t *testing.T, dir string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, ".ralph", "logs*", "session-*.log"))
	var b strings.Builder
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		b.Write(data)
	}
	return b.String()
}

func filesAddTasks(e *e2e, n int) {
	e.t.Helper()
	for i := 1; i <= n; i++ {
		e.ok("task", "add", fmt.Sprintf("Task %d", i), "--id", fmt.Sprintf("t-%d", i))
	}
}

// filesWantSaid checks that the build's output and its session log say that a
// link at name was refused.
func filesWantSaid(t *testing.T, r e2eResult, dir, name string) {
	t.Helper()
	out := r.stdout + r.stderr
	if !strings.Contains(out, "refused a link") || !strings.Contains(out, name) {
		t.Errorf("the output does not say the link at %s was refused:\n%s", name, out+filesSessionLogs(t, dir))
	}
	if log := filesSessionLogs(t, dir); !strings.Contains(log, "refused a link") || !strings.Contains(log, name) {
		t.Errorf("the session log does not say the link at %s was refused:\n%s", name, log)
	}
}

// TestAttackRawStreamLink: the agent links the next iterations' raw
// streams to a file outside the project and, inside it, to the plan. The
// next sessions run, their streams unlogged; nothing is appended to
// either target; the build completes and says why the streams are missing.
func TestAttackRawStreamLink(t *testing.T) {
	e := newProject(t, nil)
	filesAddTasks(e, 3)
	home, bashrc := filesOutsideHome(t)
	agent, _ := fakeAgentPath(t,
		agentStep{Sh: filesPlant(bashrc, "iter-2.ndjson") + "; " + filesPlant("../../progress.db", "iter-3.ndjson"), Text: done},
		agentStep{Text: done},
	)
	r := e.run("build", "--claude", agent)
	if r.code != 0 || !strings.Contains(r.stdout, "complete: all 3 tasks done") {
		t.Fatalf("build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	filesHomeUntouched(t, home)
	filesWantSaid(t, r, e.dir, "iter-2.ndjson")
	filesWantSaid(t, r, e.dir, "iter-3.ndjson")
	// The plan was not appended to: it still opens, and holds the work.
	dbAfter, _ := os.ReadFile(filepath.Join(e.dir, ".ralph", "progress.db"))
	if strings.Contains(string(dbAfter), `"type":"system"`) {
		t.Error("the agent's stream was appended to the plan")
	}
	if got := e.show("t-3"); got.Status != "done" {
		t.Errorf("t-3 is %s, want done", got.Status)
	}
	links, _ := filepath.Glob(filepath.Join(e.dir, ".ralph", "logs", "session-*", "iter-[23].ndjson"))
	for _, l := range links {
		if fi, err := os.Lstat(l); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer the agent's link: ralph replaced it (%v)", l, err)
		}
	}
}

// TestAttackVerifierStreamLink: the work agent links the verifier's
// stream of its own iteration to the file outside.
func TestAttackVerifierStreamLink(t *testing.T) {
	filesNeedGit(t)
	e := newProject(t, nil)
	gitInit(t, e.dir)
	filesAddTasks(e, 1)
	home, bashrc := filesOutsideHome(t)
	agent, _ := fakeAgentPath(t,
		agentStep{Sh: filesPlant(bashrc, "iter-1-verify.ndjson"), Text: done},
		agentStep{Text: "<verify-pass/>"},
	)
	r := e.run("build", "--claude", agent, "--verify")
	if r.code != 0 || !strings.Contains(r.stdout, "verifier: pass") {
		t.Fatalf("build --verify: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	filesHomeUntouched(t, home)
	filesWantSaid(t, r, e.dir, "iter-1-verify.ndjson")
	if got := e.show("t-1"); got.Status != "done" {
		t.Errorf("t-1 is %s, want done", got.Status)
	}
}

// TestAttackStreamLinkAfterUsageLimit: the agent swaps its own stream for
// a link and hits a usage limit; after the wait ralph reopens the
// iteration's stream to append the next attempt, and refuses the link.
func TestAttackStreamLinkAfterUsageLimit(t *testing.T) {
	e := newProject(t, nil)
	filesAddTasks(e, 1)
	home, bashrc := filesOutsideHome(t)
	swap := fmt.Sprintf(`for d in .ralph/logs/session-*/; do mv "${d}iter-1.ndjson" "${d}iter-1.old" && ln -s %s "${d}iter-1.ndjson"; done`, shQuote(bashrc))
	agent, _ := fakeAgentPath(t,
		agentStep{Sh: swap, UsageLimit: time.Now().Add(time.Second).Unix()},
		agentStep{Text: done},
	)
	r := e.run("build", "--claude", agent, "--on-usage-limit", "wait", "--max-wait", "1h")
	if r.code != 0 {
		t.Fatalf("build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	filesHomeUntouched(t, home)
	filesWantSaid(t, r, e.dir, "iter-1.ndjson")
}

// TestAttackWorkerStreamLink: with --workers 2, each agent links every
// worker's next streams (wK-iter-N) to the file outside.
func TestAttackWorkerStreamLink(t *testing.T) {
	filesNeedGit(t)
	e := newProject(t, nil)
	gitInit(t, e.dir)
	filesAddTasks(e, 4)
	home, bashrc := filesOutsideHome(t)
	var names []string
	for k := 1; k <= 2; k++ {
		for n := 1; n <= 6; n++ {
			names = append(names, fmt.Sprintf("w%d-iter-%d.ndjson", k, n))
		}
	}
	agent, _ := fakeAgentPath(t, agentStep{Sh: filesPlant(bashrc, names...) + "; echo {task} > {task}.txt", Text: done})
	r := e.run("build", "--claude", agent, "--workers", "2")
	if r.code != 0 {
		t.Fatalf("build --workers 2: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	filesHomeUntouched(t, home)
	out := r.stdout + r.stderr
	if !strings.Contains(out, "refused a link") || !strings.Contains(out, "-iter-") {
		t.Errorf("the output does not say a worker's stream was refused:\n%s\n%s", out, filesSessionLogs(t, e.dir))
	}
	for i := 1; i <= 4; i++ {
		if got := e.show(fmt.Sprintf("t-%d", i)); got.Status != "done" {
			t.Errorf("t-%d is %s, want done", i, got.Status)
		}
	}
}

// TestAttackSessionAndEventLogLinks: the agent swaps the running session's
// log and event log for links, and plants links at the session logs and
// event logs the next runs would take (every second of the next two
// minutes). Neither run writes through one.
func TestAttackSessionAndEventLogLinks(t *testing.T) {
	if _, err := exec.Command("date", "-u", "-d", "@0").Output(); err != nil {
		t.Skip("no GNU date to name the next sessions")
	}
	e := newProject(t, nil)
	filesAddTasks(e, 2)
	home, bashrc := filesOutsideHome(t)
	b := shQuote(bashrc)
	payload := `for f in .ralph/logs/session-*.log .ralph/logs/session-*/events.jsonl; do mv "$f" "$f.old" && ln -s ` + b + ` "$f"; done
now=$(date +%s); i=0
while [ $i -lt 120 ]; do
	n=$(date -u -d "@$((now + i))" +session-%Y%m%d-%H%M%S)
	ln -s ` + b + ` ".ralph/logs/$n.log" 2>/dev/null
	mkdir -p ".ralph/logs/$n" && ln -s ` + b + ` ".ralph/logs/$n/events.jsonl" 2>/dev/null
	i=$((i + 1))
done`
	agent, _ := fakeAgentPath(t, agentStep{Sh: payload, Text: done}, agentStep{Text: done})
	if r := e.run("build", "--claude", agent, "--once"); r.code != 0 {
		t.Fatalf("first build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r := e.run("build", "--claude", agent)
	if r.code != 0 {
		t.Fatalf("second build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	filesHomeUntouched(t, home)
}

// TestAttackLogDirLink: the agent replaces .ralph/logs with a link to a
// directory outside. The run goes on, its next stream refused and said;
// the next run does not start, and names the link.
func TestAttackLogDirLink(t *testing.T) {
	e := newProject(t, nil)
	filesAddTasks(e, 3)
	home, _ := filesOutsideHome(t)
	agent, _ := fakeAgentPath(t,
		agentStep{Sh: "mv .ralph/logs .ralph/logs.old && ln -s " + shQuote(home) + " .ralph/logs", Text: done},
		agentStep{Text: done},
	)
	r := e.run("build", "--claude", agent, "--max-iterations", "2")
	if r.code != 0 {
		t.Fatalf("build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	filesWantSaid(t, r, e.dir, filepath.Join(".ralph", "logs")+" is a symbolic link")
	filesHomeUntouched(t, home)

	r = e.run("build", "--claude", agent)
	if r.code == 0 || !strings.Contains(r.stderr, "refused a link") || !strings.Contains(r.stderr, filepath.Join(".ralph", "logs")) {
		t.Errorf("a build with .ralph/logs a link: exit %d, want a refusal naming it\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	filesHomeUntouched(t, home)
	if got := e.show("t-3"); got.Status != "pending" {
		t.Errorf("t-3 is %s: the refused build ran", got.Status)
	}
}

// filesSecretContent is the stand-in for ~/.ssh/id_rsa.
const filesSecretContent = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA-the-secret\n"

func filesSecretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "id_rsa")
	if err := os.WriteFile(p, []byte(filesSecretContent), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// filesNoSecretSent checks that no session of the agent got the secret.
func filesNoSecretSent(t *testing.T, script string) {
	t.Helper()
	for i, c := range agentCalls(t, script) {
		if strings.Contains(c.Prompt, "the-secret") || strings.Contains(c.System, "the-secret") {
			t.Errorf("session %d got the secret in its prompt", i+1)
		}
	}
}

// TestAttackPromptOverrideLink: the agent links the prompt overrides to a
// secret; the next build refuses to start, names the link, and the secret
// never reaches a prompt.
func TestAttackPromptOverrideLink(t *testing.T) {
	e := newProject(t, nil)
	filesAddTasks(e, 2)
	secret := filesSecretFile(t)
	s := shQuote(secret)
	agent, script := fakeAgentPath(t,
		agentStep{Sh: "mkdir -p .ralph/prompts && ln -s " + s + " .ralph/prompts/build.md && ln -s " + s + " .ralph/prompts/system-build.md", Text: done},
		agentStep{Text: done},
	)
	if r := e.run("build", "--claude", agent, "--once"); r.code != 0 {
		t.Fatalf("first build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r := e.run("build", "--claude", agent)
	if r.code == 0 || !strings.Contains(r.stderr, "refused a link") || !strings.Contains(r.stderr, filepath.Join(".ralph", "prompts")) {
		t.Errorf("build with a linked prompt override: exit %d, want a refusal naming it\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "the-secret") {
		t.Error("the secret was printed")
	}
	if n := len(agentCalls(t, script)); n != 1 {
		t.Errorf("%d sessions, want only the first build's", n)
	}
	filesNoSecretSent(t, script)
}

// TestAttackSpecLink: a spec linked to a secret is refused by `ralph plan`
// and the secret never reaches the planner's prompt.
func TestAttackSpecLink(t *testing.T) {
	e := newProject(t, nil)
	secret := filesSecretFile(t)
	if err := os.MkdirAll(filepath.Join(e.dir, "specs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "specs", "a.md"), []byte("# A calculator\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(e.dir, "specs", "b.md")); err != nil {
		t.Fatal(err)
	}
	agent, script := fakeAgentPath(t, agentStep{Text: "<promise>COMPLETE</promise>"})
	r := e.run("plan", "--claude", agent)
	if r.code == 0 || !strings.Contains(r.stderr, "refused a link") || !strings.Contains(r.stderr, filepath.Join("specs", "b.md")) {
		t.Errorf("plan with a linked spec: exit %d, want a refusal naming it\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	filesNoSecretSent(t, script)
}

// filesServeGet fetches path from a running ralph serve.
func filesServeGet(t *testing.T, s *browserServe, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(s.url, "/") + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAttackServeLogLinks: ralph serve serves no file through a link under
// .ralph/logs, nor through a .ralph/logs that is a link.
func TestAttackServeLogLinks(t *testing.T) {
	e := newProject(t, nil)
	filesAddTasks(e, 1)
	secret := filesSecretFile(t)
	agent, _ := fakeAgentPath(t, agentStep{Sh: filesPlant(secret, "iter-9.ndjson", "notes.txt"), Text: done})
	if r := e.run("build", "--claude", agent); r.code != 0 {
		t.Fatalf("build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	sessions, _ := filepath.Glob(filepath.Join(e.dir, ".ralph", "logs", "session-*"))
	var session string
	for _, p := range sessions {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			session = filepath.Base(p)
		}
	}
	if session == "" {
		t.Fatal("no session directory")
	}

	s := startBrowserServe(t, e.bin, e.dir, e.env, "--addr", "127.0.0.1:0")
	if code, body := filesServeGet(t, s, "/logs/"+session+"/iter-1.ndjson"); code != 200 || !strings.Contains(body, `"type":"system"`) {
		t.Fatalf("the real stream: %d %q", code, body)
	}
	for _, name := range []string{"iter-9.ndjson", "notes.txt"} {
		if code, body := filesServeGet(t, s, "/logs/"+session+"/"+name); code != 404 || strings.Contains(body, "the-secret") {
			t.Errorf("a link under .ralph/logs (%s): %d %q", name, code, body)
		}
	}

	// .ralph/logs itself a link to a directory holding a session.
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, session), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, session, "iter-1.ndjson"), []byte(filesSecretContent), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(e.dir, ".ralph", "logs")
	if err := os.Rename(logs, logs+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, logs); err != nil {
		t.Fatal(err)
	}
	s2 := startBrowserServe(t, e.bin, e.dir, e.env, "--addr", "127.0.0.1:0")
	if code, body := filesServeGet(t, s2, "/logs/"+session+"/iter-1.ndjson"); code != 404 || strings.Contains(body, "the-secret") {
		t.Errorf("a stream through a linked .ralph/logs: %d %q", code, body)
	}
	if code, body := filesServeGet(t, s2, "/api/run"); code != 200 || strings.Contains(body, session) {
		t.Errorf("/api/run through a linked .ralph/logs: %d %s", code, body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(s2.out.String(), "refused a link") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if out := s2.out.String(); !strings.Contains(out, "refused a link") || !strings.Contains(out, logs) {
		t.Errorf("ralph serve does not say it refused .ralph/logs:\n%s", out)
	}
}

func filesNeedGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
}

// TestAttackTreeLockLink: the agent replaces .ralph/tree.lock, which every
// build in the tree opens and writes its record to (loop/treelock.go),
// with a link to a file outside the project. The next builds, plain and
// verifying, do not start and name the link; the file outside is
// neither written nor truncated.
func TestAttackTreeLockLink(t *testing.T) {
	e := newProject(t, nil)
	filesAddTasks(e, 2)
	home, bashrc := filesOutsideHome(t)
	payload := `rm -f .ralph/tree.lock && ln -s ` + shQuote(bashrc) + ` .ralph/tree.lock`
	agent, _ := fakeAgentPath(t, agentStep{Sh: payload, Text: done}, agentStep{Text: done})
	if r := e.run("build", "--claude", agent, "--once"); r.code != 0 {
		t.Fatalf("first build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if fi, err := os.Lstat(filepath.Join(e.dir, ".ralph", "tree.lock")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the payload planted no link: %v", err)
	}
	for _, args := range [][]string{{"build"}, {"build", "--verify"}} {
		r := e.run(append(args, "--claude", agent)...)
		if r.code != exitError || !strings.Contains(r.stderr, "tree.lock") {
			t.Errorf("%v over a planted link: exit %d, stderr %q; want exit 1 naming .ralph/tree.lock", args, r.code, r.stderr)
		}
	}
	filesHomeUntouched(t, home)
}
