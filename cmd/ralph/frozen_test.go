//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
)

// TestFrozenHolder is DESIGN §14's stale landing through the binary, on
// one SQLite plan and one repository: machine 1's ralph is stopped
// (SIGSTOP, as a suspended laptop is) by a git that stands in for the
// real one just before it moves the integration branch to task a's
// landing — after its last claim check passed. Machine 2 takes the task
// over when the 3 s lease has run out; while its agent works, machine 1
// wakes and its move goes ahead. The fence refuses it: the task lands
// once, machine 2's work under machine 2's claim, machine 2's build ends
// in seconds with nothing lost or waited on, and machine 1 gives the
// task up.
func TestFrozenHolder(t *testing.T) {
	frozenHolder(t, "")
}

// TestFrozenHolderOnPostgres is TestFrozenHolder on a PostgreSQL plan
// with two clones of one bare repository (--remote origin): the frozen
// move is machine 1's push.
func TestFrozenHolderOnPostgres(t *testing.T) {
	frozenHolder(t, pgtest.URL(t))
}

func frozenHolder(t *testing.T, db string) {
	if testing.Short() {
		t.Skip("two builds, one of them stopped past its lease")
	}
	needTools(t, "git")
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	m := &machinesRun{t: t, bin: ralphBinary(t), ids: []string{"a", "b"}, deps: map[string][]string{"b": {"a"}}}
	m.env = append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=", "RALPH_HOST_ID=",
		"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	if db != "" {
		m.dbArgs = []string{"--db", db, "--plan", "shared"}
	}
	m.seedProject()
	build := append(slices.Clip(m.dbArgs), "build", "--workers", "1", "--lease", "3s", "--max-iterations", "20")
	dirs := []string{m.seed, m.seed}
	freezeOn := "update-ref"
	if db != "" {
		m.cloneMachines(true)
		dirs = m.machines
		build = append(build, "--remote", "origin")
		freezeOn = "push"
	}
	agent, wrap := frozenScripts(t, m, realGit, freezeOn)
	build = append(build, "--claude", agent)
	env1 := append(slices.Clip(m.env), "RALPH_HOST_ID=machine-1", "PATH="+wrap+string(os.PathListSeparator)+os.Getenv("PATH"))
	env2 := append(slices.Clip(m.env), "RALPH_HOST_ID=machine-2")

	var first machineRun
	done1 := make(chan struct{})
	go func() {
		defer close(done1)
		first.code, first.out, first.errs = runBinary(t, m.bin, dirs[0], env1, build...)
	}()
	t.Cleanup(func() {
		// Whatever happened, nothing stays stopped.
		if b, err := os.ReadFile(filepath.Join(m.marks, "frozen", "pids")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscall.Kill(pid, syscall.SIGCONT)
				}
			}
		}
	})
	waitFrozen(t, m, done1, &first)

	start := time.Now()
	code, out, errs := runBinary(t, m.bin, dirs[1], env2, build...)
	took := time.Since(start)
	select {
	case <-done1:
	case <-time.After(60 * time.Second):
		t.Fatal("machine 1 did not end after it was woken")
	}
	if code != 0 {
		t.Fatalf("machine 2: exit %d after %v\nstdout:\n%s\nstderr:\n%s\nmachine 1: exit %d\nstdout:\n%s\nstderr:\n%s", code, took, out, errs, first.code, first.out, first.errs)
	}
	if first.code != 0 {
		t.Errorf("machine 1: exit %d\nstdout:\n%s\nstderr:\n%s", first.code, first.out, first.errs)
	}
	moved, err := os.ReadFile(filepath.Join(m.marks, "frozen", "done"))
	if err != nil || strings.TrimSpace(string(moved)) == "0" {
		t.Errorf("machine 1's stale move of the integration branch went through (git's exit %q, %v); want it refused", moved, err)
	}
	// Seconds: the lease, two short sessions, a few git runs; never the
	// lease again and again, or a wait on itself.
	if took > 30*time.Second {
		t.Errorf("machine 2 took %v; want seconds", took)
	}
	if strings.Contains(out, "claim was lost") {
		t.Errorf("machine 2 lost its own claim:\n%s", out)
	}

	checkOneLanding(t, m, dirs[1], db != "")
	runs, _ := os.ReadFile(filepath.Join(m.marks, "runs"))
	if n := strings.Count(string(runs), "a machine-2"); n != 1 {
		t.Errorf("machine 2 ran task a %d times; want once:\n%s", n, runs)
	}
	for _, id := range m.ids {
		if _, js, _ := m.ralph(dirs[1], m.env, append(slices.Clip(m.dbArgs), "task", "show", id, "--json")...); !strings.Contains(js, `"status": "done"`) {
			t.Errorf("task %s is not done:\n%s", id, js)
		}
	}
	t.Logf("machine 2 ended in %v", took)
}

// frozenScripts writes the stand-in agent and machine 1's git (which
// stops ralph at the move named by freezeOn, "update-ref" or "push") and
// returns the agent and the directory of the git.
func frozenScripts(t *testing.T, m *machinesRun, realGit, freezeOn string) (agent, wrap string) {
	t.Helper()
	agent = filepath.Join(t.TempDir(), "agent.sh")
	writeFile(t, agent, `#!/bin/sh
cat >/dev/null
id=$RALPH_TASK_ID
marks=`+shQuote(m.marks)+`
echo "$id $RALPH_HOST_ID" >> "$marks/runs"
# Machine 1's git stops it at the next move of the branch: this landing.
[ "$RALPH_HOST_ID" = machine-1 ] && touch "$marks/armed"
if [ "$id" = a ] && [ "$RALPH_HOST_ID" = machine-2 ]; then
	# The frozen holder wakes while this claim works, and moves the branch.
	kill -CONT $(cat "$marks/frozen/pids")
	i=0; while [ ! -f "$marks/frozen/done" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
fi
echo "$id by $RALPH_HOST_ID" > "$id.txt"
printf '{"type":"system","subtype":"init","session_id":"s-%s","model":"stand-in"}\n' "$id"
printf '{"type":"result","subtype":"success","is_error":false,"result":"Done. <task-done>%s</task-done>","session_id":"s-%s","num_turns":1,"total_cost_usd":0.01}\n' "$id" "$id"
`, 0o755)
	// Machine 1's git: the real one, but the first move of the
	// integration branch after machine 1's agent ran (its landing) stops
	// ralph (its parent) and itself first; it goes ahead when continued,
	// and says how it ended.
	wrap = t.TempDir()
	writeFile(t, filepath.Join(wrap, "git"), `#!/bin/sh
marks=`+shQuote(m.marks)+`
in=$(mktemp)
cat > "$in"
freeze=
case " $* " in
*" `+freezeOn+` "*)
	case " $* " in
	*" refs/heads/ralph/integration "*|*":refs/heads/ralph/integration "*) freeze=1 ;;
	esac
	grep -q '^update refs/heads/ralph/integration ' "$in" && freeze=1
	;;
esac
if [ -n "$freeze" ] && [ -f "$marks/armed" ] && mkdir "$marks/frozen" 2>/dev/null; then
	echo "$PPID $$" > "$marks/frozen/pids.tmp"
	mv "$marks/frozen/pids.tmp" "$marks/frozen/pids"
	kill -STOP $PPID
	kill -STOP $$
	`+shQuote(realGit)+` "$@" < "$in"
	code=$?
	echo $code > "$marks/frozen/done"
	rm -f "$in"
	exit $code
fi
`+shQuote(realGit)+` "$@" < "$in"
code=$?
rm -f "$in"
exit $code
`, 0o755)
	return agent, wrap
}

// waitFrozen waits until machine 1's git has stopped it (its pids
// written), failing the test if machine 1 ends first (done1) or never
// stops.
func waitFrozen(t *testing.T, m *machinesRun, done1 <-chan struct{}, first *machineRun) {
	t.Helper()
	pids := filepath.Join(m.marks, "frozen", "pids")
	for deadline := time.Now().Add(60 * time.Second); ; {
		if _, err := os.Stat(pids); err == nil {
			break
		}
		select {
		case <-done1:
			t.Fatalf("machine 1 ended (exit %d) without moving the integration branch\nstdout:\n%s\nstderr:\n%s", first.code, first.out, first.errs)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("machine 1 never moved the integration branch")
		}
	}
}

// checkOneLanding checks that task a landed once on the integration
// branch (the bare repository's, onRemote), with machine 2's work.
func checkOneLanding(t *testing.T, m *machinesRun, dir string, onRemote bool) {
	t.Helper()
	repo := dir
	if onRemote {
		repo = m.bare
	}
	var landings []string
	for _, c := range strings.Fields(m.git(repo, "log", "--format=%H", "ralph/integration")) {
		msg := m.git(repo, "log", "-1", "--format=%B", c)
		if strings.Contains(msg, "Ralph-Task: a\n") || strings.HasSuffix(msg, "Ralph-Task: a") {
			landings = append(landings, c)
		}
	}
	if len(landings) != 1 {
		t.Fatalf("task a landed %d times on the integration branch; want once", len(landings))
	}
	if got := m.git(repo, "show", landings[0]+":a.txt"); got != "a by machine-2" {
		t.Errorf("a.txt as landed = %q; want the current claim's work (machine 2's)", got)
	}
}

// writeFile writes a test's file, failing the test when it cannot.
func writeFile(t *testing.T, name, content string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
}
