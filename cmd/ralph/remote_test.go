package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
)

// TestWorkersOnSeveralMachines is README's "Several machines" the way
// a user runs it, as far as one computer can: two clones of one bare
// repository, each with its own ralph init and host identity
// (RALPH_HOST_ID), both reaching one plan (here one SQLite file, which
// each clone's .ralph/progress.db links to; a database server once --db
// exists), each running `ralph build --workers 2 --remote origin` at the
// same time. Every task's work lands once on the remote's
// ralph/integration, in an order the graph allows, each task beginning
// with its blockers' work whichever machine landed them; both machines
// work; both end 0 naming the branch, the remote and the pull that takes
// it.
func TestWorkersOnSeveralMachines(t *testing.T) {
	deps := map[string][]string{"a": nil, "b": nil, "c": {"a"}, "d": {"b"}, "e": {"c", "d"}, "f": nil}
	severalMachines(t, "", []string{"a", "b", "c", "d", "e", "f"}, deps, false)
}

// TestMachinesOnPostgres is ARCHITECTURE.md §6 as a new user would try it: one
// PostgreSQL server, one bare repository, two clones ("machines" with
// their own RALPH_HOST_ID), each running `ralph build --db URL --workers 2
// --remote origin` on a 20-task graph: every task's work lands exactly
// once on the integration branch, in an order the graph allows.
func TestMachinesOnPostgres(t *testing.T) { machinesOnServer(t, pgtest.URL(t)) }

// TestMachinesThroughPgBouncer is TestMachinesOnPostgres with both
// machines reaching the server through PgBouncer in transaction pooling,
// where waits ask the server instead of listening.
func TestMachinesThroughPgBouncer(t *testing.T) {
	url, _ := pgtest.Pooled(t)
	machinesOnServer(t, url)
}

func machinesOnServer(t *testing.T, url string) {
	var ids []string
	deps := map[string][]string{}
	for i := 1; i <= 20; i++ {
		id := fmt.Sprintf("t%02d", i)
		ids = append(ids, id)
		if i > 5 {
			deps[id] = append(deps[id], fmt.Sprintf("t%02d", i-5))
		}
	}
	deps["t20"] = append(deps["t20"], "t19")
	severalMachines(t, url, ids, deps, false)
}

// TestMachineKilledOnPostgres: the same two machines, but the first
// machine's ralph is killed (kill -9) while its agent works on a task; the
// other machine waits for that claim, recovers it when its lease (3 s, no
// longer renewed) has run out, and finishes the plan: nothing is lost and
// every task's work still lands exactly once.
func TestMachineKilledOnPostgres(t *testing.T) { machineKilled(t, pgtest.URL(t)) }

// TestMachineKilledThroughPgBouncer is TestMachineKilledOnPostgres
// through PgBouncer in transaction pooling: the killed machine's session
// ends at the pooler, and its claim is recovered by its lease alone.
func TestMachineKilledThroughPgBouncer(t *testing.T) {
	url, _ := pgtest.Pooled(t)
	machineKilled(t, url)
}

func machineKilled(t *testing.T, url string) {
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	deps := map[string][]string{"e": {"a"}, "f": {"b"}, "g": {"e", "f"}, "h": {"g"}}
	severalMachines(t, url, ids, deps, true)
}

// severalMachines runs two machines' builds of one plan at once: on the
// SQLite file of a seed project (db "", each clone's database a symlink to
// it), or on the PostgreSQL server db. With kill, machine 1's ralph is
// killed with SIGKILL during its second session, whose agent then works
// forever; its claim's lease is 3 s.
func severalMachines(t *testing.T, db string, ids []string, deps map[string][]string, kill bool) {
	if testing.Short() {
		t.Skip("two parallel builds in two clones")
	}
	needTools(t, "git", "go")
	m := &machinesRun{t: t, bin: ralphBinary(t), ids: ids, deps: deps}
	m.env = append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=", "RALPH_HOST_ID=",
		"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	// On a server, every command names it; the plan is the seed
	// directory's name unless --plan says otherwise.
	if db != "" {
		m.dbArgs = []string{"--db", db, "--plan", "shared"}
	}
	m.seedProject()
	m.cloneMachines(db != "")
	m.writeAgent()
	runs := m.build(kill)
	for k, r := range runs {
		if r.code != 0 {
			t.Fatalf("machine %d: exit %d\nstdout:\n%s\nstderr:\n%s", k+1, r.code, r.out, r.errs)
		}
		if !strings.Contains(r.out, "integration branch: ralph/integration on origin · merge it with: git pull origin ralph/integration") {
			t.Errorf("machine %d's end does not name the branch, the remote and the pull:\n%s", k+1, r.out)
		}
	}
	if problems, err := os.ReadFile(filepath.Join(m.marks, "problems")); err == nil {
		t.Errorf("the stand-in agent saw:\n%s", problems)
	}
	ranBy := m.checkSessions()
	m.checkLanded(ranBy)
	m.checkMachines()
}

// machinesRun is the state of a severalMachines test: the ralph binary,
// the environment, the plan's tasks and blockers, the seed project, the
// shared bare repository, the machines' clones and the stand-in agent's
// marks.
type machinesRun struct {
	t                *testing.T
	bin              string
	env, dbArgs, ids []string
	deps             map[string][]string
	seed, bare       string
	machines         []string
	marks, agent     string
	// victim is the task whose session machine 1 was killed in ("" none).
	victim string
}

// machineRun is what one machine's ralph build ended with.
type machineRun struct {
	code      int
	out, errs string
}

func (m *machinesRun) git(dir string, args ...string) string {
	m.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = m.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		m.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (m *machinesRun) ralph(dir string, env []string, args ...string) (int, string, string) {
	m.t.Helper()
	return runBinary(m.t, m.bin, dir, env, args...)
}

// seedProject is the project, as its author sets it up: ralph init, the
// plan imported, the project pushed to the shared repository.
func (m *machinesRun) seedProject() {
	t := m.t
	m.seed = filepath.Join(t.TempDir(), "seed")
	seed := m.seed
	os.MkdirAll(seed, 0o755)
	os.WriteFile(filepath.Join(seed, "README"), []byte("the project\n"), 0o644)
	os.WriteFile(filepath.Join(seed, ".gitignore"), []byte(".ralph/\n"), 0o644)
	m.git(seed, "init", "-q", "-b", "main")
	m.git(seed, "add", "-A")
	m.git(seed, "commit", "-q", "-m", "the project")
	if code, _, errs := m.ralph(seed, m.env, append(m.dbArgs, "init")...); code != 0 {
		t.Fatalf("ralph init: %s", errs)
	}
	m.git(seed, "add", "-A")
	m.git(seed, "commit", "-q", "-m", "ralph init")
	var plan, depLines strings.Builder
	for _, id := range m.ids {
		blocked := "[]"
		if bs := m.deps[id]; len(bs) > 0 {
			blocked = `["` + strings.Join(bs, `","`) + `"]`
		}
		fmt.Fprintf(&plan, `{"id":%q,"title":"Task %s","blocked_by":%s}`+"\n", id, id, blocked)
		fmt.Fprintf(&depLines, "%s %s\n", id, strings.Join(m.deps[id], " "))
	}
	planFile := filepath.Join(t.TempDir(), "plan.jsonl")
	os.WriteFile(planFile, []byte(plan.String()), 0o644)
	if code, _, errs := m.ralph(seed, m.env, append(m.dbArgs, "task", "import", planFile)...); code != 0 {
		t.Fatalf("import: %s", errs)
	}
	m.bare = filepath.Join(t.TempDir(), "shared.git")
	m.git(seed, "clone", "-q", "--bare", seed, m.bare)
	m.marks = t.TempDir()
	os.WriteFile(filepath.Join(m.marks, "deps"), []byte(depLines.String()), 0o644)
}

// cloneMachines makes each machine: a clone, ralph init, the shared plan
// (on the server, or the seed's SQLite file through a symlink).
func (m *machinesRun) cloneMachines(onServer bool) {
	t := m.t
	for k := 1; k <= 2; k++ {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("machine%d", k))
		m.git(m.seed, "clone", "-q", m.bare, dir)
		if code, _, errs := m.ralph(dir, m.env, append(m.dbArgs, "init")...); code != 0 {
			t.Fatalf("ralph init in clone %d: %s", k, errs)
		}
		if onServer {
			m.machines = append(m.machines, dir)
			continue
		}
		db := filepath.Join(dir, ".ralph", "progress.db")
		for _, f := range []string{db, db + "-wal", db + "-shm"} {
			os.Remove(f)
		}
		if err := os.Symlink(filepath.Join(m.seed, ".ralph", "progress.db"), db); err != nil {
			t.Fatal(err)
		}
		m.machines = append(m.machines, dir)
	}
}

// writeAgent writes the stand-in agent. The first session on each
// machine waits (up to 10 s) until the other machine has one under way
// too: both machines work.
func (m *machinesRun) writeAgent() {
	m.agent = filepath.Join(m.t.TempDir(), "agent.sh")
	script := `#!/bin/sh
cat >/dev/null
id=$RALPH_TASK_ID
marks=` + shQuote(m.marks) + `
echo "$id $RALPH_HOST_ID" >> "$marks/runs"
if [ -n "$RALPH_TEST_KILL" ] && [ "$RALPH_HOST_ID" = machine-1 ] && [ "$(grep -c machine-1 "$marks/runs")" -ge 2 ] && ! ls "$marks" | grep -q '^victim-'; then
	touch "$marks/victim-$id"
	exec sleep 600
fi
touch "$marks/host-$RALPH_HOST_ID"
i=0
while [ "$(ls "$marks" | grep -c '^host-')" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
for b in $(grep "^$id " "$marks/deps" | cut -d' ' -f2-); do
	[ -f "$b.txt" ] || echo "$id began without $b's work on $RALPH_HOST_ID" >> "$marks/problems"
done
echo "$id" > "$id.txt"
printf '{"type":"system","subtype":"init","session_id":"s-%s","model":"stand-in"}\n' "$id"
printf '{"type":"result","subtype":"success","is_error":false,"result":"Done. <task-done>%s</task-done>","session_id":"s-%s","num_turns":1,"total_cost_usd":0.01}\n' "$id" "$id"
`
	if err := os.WriteFile(m.agent, []byte(script), 0o755); err != nil {
		m.t.Fatal(err)
	}
}

// build runs both machines' builds at once and returns how those that
// were not killed ended; with kill, machine 1 is killed (and left out of
// m.machines and the runs) once its agent has marked the task it will
// never finish.
func (m *machinesRun) build(kill bool) []machineRun {
	runs := make([]machineRun, len(m.machines))
	var wg sync.WaitGroup
	build := append(slices.Clip(m.dbArgs), "build", "--workers", "2", "--remote", "origin", "--claude", m.agent, "--max-iterations", "60")
	for k, dir := range m.machines {
		menv := append(slices.Clip(m.env), fmt.Sprintf("RALPH_HOST_ID=machine-%d", k+1))
		if !kill || k > 0 {
			wg.Go(func() {
				r := &runs[k]
				r.code, r.out, r.errs = m.ralph(dir, menv, build...)
			})
			continue
		}
		m.startVictim(&wg, dir, menv, build)
	}
	wg.Wait()
	if kill {
		runs = runs[1:]
		m.machines = m.machines[1:]
		if m.victim == "" {
			m.t.FailNow()
		}
	}
	return runs
}

// startVictim starts the machine to kill by hand, and kills it once its
// agent has marked the task it will never finish (m.victim).
func (m *machinesRun) startVictim(wg *sync.WaitGroup, dir string, menv, build []string) {
	cmd := exec.Command(m.bin, append(build, "--lease", "3s")...)
	cmd.Dir, cmd.Env = dir, append(menv, "RALPH_TEST_KILL=1")
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	wg.Go(func() {
		defer cmd.Wait()
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if found, _ := filepath.Glob(filepath.Join(m.marks, "victim-*")); len(found) > 0 {
				m.victim = strings.TrimPrefix(filepath.Base(found[0]), "victim-")
				cmd.Process.Kill()
				return
			}
		}
		cmd.Process.Kill()
		m.t.Error("machine 1 never reached its second session")
	})
}

// checkSessions checks that both machines ran sessions and that the
// killed machine's claim came back by its lease, to the other machine;
// it returns the hosts each task's sessions ran on.
func (m *machinesRun) checkSessions() map[string][]string {
	t := m.t
	ranBy := map[string][]string{}
	hosts := map[string]bool{}
	b, _ := os.ReadFile(filepath.Join(m.marks, "runs"))
	for line := range strings.Lines(string(b)) {
		if id, host, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			ranBy[id] = append(ranBy[id], host)
			hosts[host] = true
		}
	}
	if m.victim != "" {
		_, show, _ := m.ralph(m.machines[0], m.env, append(m.dbArgs, "task", "show", m.victim)...)
		if !strings.Contains(show, "lease-expired") {
			t.Errorf("task %s's history does not say its lease expired:\n%s", m.victim, show)
		}
		if runsOf := ranBy[m.victim]; len(runsOf) != 2 || runsOf[1] != "machine-2" {
			t.Errorf("task %s ran on %v; want machine-1 (killed), then machine-2", m.victim, runsOf)
		}
	}
	if !hosts["machine-1"] || !hosts["machine-2"] {
		t.Errorf("sessions ran on %v; want both machines", hosts)
	}
	return ranBy
}

// checkLanded checks the remote's integration branch: each task landed
// once, after its blockers, each task's branch in it, and the plan done.
func (m *machinesRun) checkLanded(ranBy map[string][]string) {
	t := m.t
	var landed []string
	for l := range strings.FieldsSeq(m.git(m.bare, "log", "--format=%(trailers:key=Ralph-Task,valueonly)", "ralph/integration")) {
		landed = append(landed, l)
	}
	slices.Reverse(landed)
	if got := slices.Sorted(slices.Values(landed)); !cmp.Equal(got, slices.Sorted(slices.Values(m.ids))) {
		t.Fatalf("landed on the remote %v; want each task once", landed)
	}
	for id, bs := range m.deps {
		if want := 1 + b2i(id == m.victim); len(ranBy[id]) != want {
			t.Errorf("task %s ran on %v; want %d sessions", id, ranBy[id], want)
		}
		for _, b := range bs {
			if slices.Index(landed, b) > slices.Index(landed, id) {
				t.Errorf("%s landed before its blocker %s: %v", id, b, landed)
			}
		}
		m.git(m.bare, "merge-base", "--is-ancestor", "refs/heads/ralph/task/"+id, "ralph/integration")
	}
	if _, status, _ := m.ralph(m.machines[0], m.env, append(m.dbArgs, "task", "plan-status")...); !strings.Contains(status, fmt.Sprintf("done=%d", len(m.ids))) || !strings.Contains(status, "active=0") {
		t.Errorf("plan-status: %s", status)
	}
}

// checkMachines checks each machine's end: its ralph/integration within
// the remote's (at it for one at least), its working tree untouched.
func (m *machinesRun) checkMachines() {
	tip := m.git(m.bare, "rev-parse", "ralph/integration")
	ends := 0
	for _, dir := range m.machines {
		local := m.git(dir, "rev-parse", "ralph/integration")
		m.git(m.bare, "merge-base", "--is-ancestor", local, tip)
		if local == tip {
			ends++
		}
		if st := m.git(dir, "status", "--porcelain"); st != "" {
			m.t.Errorf("%s's working tree changed: %q", dir, st)
		}
	}
	if ends == 0 {
		m.t.Error("no machine's ralph/integration ended at the remote's")
	}
}

// TestWorkersRemoteBadInput: what --remote refuses, before anything runs
// or is claimed: an unknown remote is a git failure (exit 5) naming it;
// --remote without workers on a plan without an integration branch, or
// without a name, is a usage error (exit 1).
func TestWorkersRemoteBadInput(t *testing.T) {
	needTools(t, "git", "go")
	agent, _ := fakeAgentPath(t, agentStep{Text: "<task-done>{task}</task-done>"})
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		words string
	}{
		{"unknown remote", []string{"--workers", "2", "--remote", "origin"}, 5, `--remote: no such remote "origin"`},
		{"without workers", []string{"--remote", "origin"}, 1, "--remote goes with --workers"},
		{"no name", []string{"--workers", "2", "--remote", " "}, 1, "--remote needs the name of a git remote"},
		{"progress file", []string{"--remote", "origin", "--progress", "p.md"}, 1, "not --progress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := initHarness(t)
			h.ok("task", "add", "A")
			for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=Dev", "-c", "user.email=dev@example.com", "commit", "-q", "-m", "x"}} {
				if out, err := exec.Command("git", append([]string{"-C", h.dir}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			before := h.dump()
			r := h.run(append([]string{"build", "--claude", agent}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.words) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.words)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("the plan changed (-before +after):\n%s", diff)
			}
			if refs, _ := exec.Command("git", "-C", h.dir, "for-each-ref", "refs/heads/ralph/").Output(); len(refs) > 0 {
				t.Errorf("a refused build made branches: %s", refs)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
