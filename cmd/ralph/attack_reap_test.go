//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/agentproc/agentproctest"
	"github.com/ralph-dev/ralph/loop"
)

// The attack of issue 20: `kill -9` of ralph while its agent works. The
// agent dies with it (its parent-death signal), but what it started —
// a Bash tool's command in its process group, a `setsid nohup … &`, a
// daemon that forked twice — lived on until some other ralph happened to
// start on the machine; if none did, forever. Now ralph's watchdog stops
// them within seconds, and no other ralph is started here (each ralph
// below has a host identity of its own, so that no sweep of another ralph
// on the machine judges its processes either).

// reapPayload is the stand-in agent's Sh step: the three kinds of
// process, told apart by how long they would sleep, then waits for them,
// as a Bash tool waits for its command.
const reapPayload = `sleep 1001 &
setsid nohup sleep 1002 >/dev/null 2>&1 &
(cd / && setsid sh -c 'exec sleep 1003' </dev/null >/dev/null 2>&1 &)
wait`

// reapSleeps are the payload's processes, by command line.
var reapSleeps = []string{"sleep 1001", "sleep 1002", "sleep 1003"}

// reapProject is a project whose ralph commands carry a token in their
// environment (every process of their agents inherits it) and a host
// identity of their own.
type reapProject struct {
	*e2e
	token string
}

func newReapProject(t *testing.T, git bool) *reapProject {
	t.Helper()
	token := fmt.Sprintf("RALPH_TEST_REAP=%d-%d", os.Getpid(), time.Now().UnixNano())
	p := &reapProject{e2e: newProject(t, []string{token, loop.EnvHostID + "=ralph-attack-reap-" + token}), token: token}
	if git {
		commitProject(t, p.dir)
	}
	return p
}

// reapProcess is a process seen with its start time.
type reapProcess struct {
	pid     int
	start   int64
	cmdline string
}

// processes returns the live processes that carry the token.
func (p *reapProject) processes() []reapProcess {
	var out []reapProcess
	for _, pid := range agentproctest.ProcessesWithEnv(p.token) {
		start, err := loop.ProcessStart(pid)
		if err != nil {
			continue // gone, or a zombie
		}
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		out = append(out, reapProcess{pid: pid, start: start, cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))})
	}
	return out
}

// startBuild starts `ralph build args…` and returns it with its output
// going to buffers.
func (p *reapProject) startBuild(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(p.bin, append([]string{"build"}, args...)...)
	cmd.Dir, cmd.Env = p.dir, p.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, pr := range p.processes() {
			_ = syscall.Kill(pr.pid, syscall.SIGKILL)
		}
	})
	return cmd, &out
}

// watchdogOf waits for the watchdog of the ralph process pid (a process
// named ralph-watchdog whose parent it is) and returns it.
func watchdogOf(t *testing.T, pid int, out *bytes.Buffer) reapProcess {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
			if err != nil || strings.TrimSpace(string(comm)) != "ralph-watchdog" {
				continue
			}
			stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if len(f) > 1 && f[1] == strconv.Itoa(pid) {
				w, _ := strconv.Atoi(e.Name())
				start, err := loop.ProcessStart(w)
				if err == nil {
					return reapProcess{pid: w, start: start, cmdline: "ralph-watchdog"}
				}
			}
		}
	}
	t.Fatalf("no watchdog of ralph %d after 20 s\n%s", pid, out)
	return reapProcess{}
}

// running reports whether pr still runs (the same process: its start time).
func (pr reapProcess) running() bool {
	start, err := loop.ProcessStart(pr.pid)
	return err == nil && start == pr.start
}

// killBuild runs `ralph build args…` on tasks whose agents run payload
// (reapPayload, or more), kills ralph with SIGKILL once all `agents`
// agents have started it, and checks that every process of theirs — and
// ralph's watchdog — is gone within a few seconds. It returns the
// watchdog that ran when ralph was killed.
func killBuild(t *testing.T, p *reapProject, agents int, payload string, args ...string) reapProcess {
	t.Helper()
	agent, _ := fakeAgentPath(t, agentStep{Sh: payload, Text: "<task-done>{task}</task-done>"})
	cmd, out := p.startBuild(t, append(args, "--claude", agent)...)
	watchdogOf(t, cmd.Process.Pid, out) // started with the first agent
	var before []reapProcess
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		before = p.processes()
		counts := map[string]int{}
		for _, pr := range before {
			counts[pr.cmdline]++
		}
		ready := true
		for _, s := range reapSleeps {
			ready = ready && counts[s] == agents
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agents' processes after 30 s: %v, want each of %q %d times\n%s", before, reapSleeps, agents, out)
		}
	}
	dog := watchdogOf(t, cmd.Process.Pid, out) // the one that runs now
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	for {
		var left []reapProcess
		for _, pr := range append(before, dog) {
			if pr.running() {
				left = append(left, pr)
			}
		}
		for _, pr := range p.processes() {
			if !slices.ContainsFunc(left, func(l reapProcess) bool { return l.pid == pr.pid }) {
				left = append(left, pr)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("5 s after kill -9 of ralph, still running: %v\nralph's output:\n%s", left, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d processes of the agents (%d agents) and the watchdog: all gone %v after kill -9", len(before), agents, time.Since(killed).Round(time.Millisecond))
	return dog
}

func TestAttackReapKillNine(t *testing.T) {
	p := newReapProject(t, false)
	p.ok("task", "add", "Start a dev server")
	killBuild(t, p, 1, reapPayload)
}

func TestAttackReapKillNineWorkers(t *testing.T) {
	needTools(t, "git", "go")
	p := newReapProject(t, true)
	p.ok("task", "add", "Start a dev server")
	p.ok("task", "add", "Run the tests in watch mode")
	killBuild(t, p, 2, reapPayload, "--workers", "2")
}

func TestAttackReapKillNineSandbox(t *testing.T) {
	needBwrap(t)
	p := newReapProject(t, false)
	p.ok("task", "add", "Start a dev server")
	killBuild(t, p, 1, reapPayload, "--sandbox")
}

// The agent kills ralph's watchdog first (`pkill ralph` would too): ralph
// starts another, which knows the run, and kill -9 of ralph still leaves
// nothing.
func TestAttackReapKillNineWatchdogKilled(t *testing.T) {
	if _, err := exec.LookPath("pkill"); err != nil {
		t.Skip("no pkill")
	}
	p := newReapProject(t, false)
	p.ok("task", "add", "Start a dev server")
	// The Sh step's parent is the agent, whose parent is ralph.
	last := killBuild(t, p, 1, `ralph=$(ps -o ppid= -p $PPID | tr -d ' ')
pgrep -P "$ralph" -x ralph-watchdog > killed-watchdog
pkill -KILL -P "$ralph" -x ralph-watchdog
`+reapPayload)
	killed, err := strconv.Atoi(strings.TrimSpace(p.read("killed-watchdog")))
	if err != nil || killed == last.pid {
		t.Errorf("the agent killed the watchdog %q; the one that ran when ralph was killed: %d", p.read("killed-watchdog"), last.pid)
	}
}

// A build that ends normally leaves no watchdog behind, and nothing of its
// agent's.
func TestAttackReapNormalRunLeavesNoWatchdog(t *testing.T) {
	p := newReapProject(t, false)
	p.ok("task", "add", "Take a second")
	agent, _ := fakeAgentPath(t, agentStep{Sh: "sleep 1", Text: "<task-done>{task}</task-done>"})
	cmd, out := p.startBuild(t, "--claude", agent)
	dog := watchdogOf(t, cmd.Process.Pid, out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "complete: all 1 task done") {
		t.Fatalf("build did not complete:\n%s", out)
	}
	ended := time.Now()
	for dog.running() {
		if time.Since(ended) > 2*time.Second {
			t.Fatalf("the watchdog %d still runs 2 s after ralph ended", dog.pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if left := p.processes(); len(left) > 0 {
		t.Errorf("processes of the run left: %v", left)
	}
	t.Logf("the watchdog exited %v after ralph", time.Since(ended).Round(time.Microsecond))
}

// BenchmarkReapWatchdogStart measures the watchdog's start with the ralph
// binary, which a ralph process pays once, at its first agent: ns/op
// until the watchdog runs its own code (it names itself), wait-µs/op the
// part ralph waits for (the exec), rss-KB and anon-KB its memory when
// idle. It starts the binary as agentproc does (argv[0] ralph-watchdog,
// the holder in RALPH_AGENTPROC_WATCHDOG, its pipe as fd 3), with this
// process as the holder, and kills it.
func BenchmarkReapWatchdogStart(b *testing.B) {
	bin := ralphBinary(b)
	me := loop.ThisProcess()
	var wait time.Duration
	var rss, anon float64
	for b.Loop() {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin)
		cmd.Args = []string{"ralph-watchdog"}
		cmd.Env = []string{"RALPH_AGENTPROC_WATCHDOG=" + me.String(), "TMPDIR=" + os.TempDir()}
		cmd.Dir = "/"
		cmd.ExtraFiles = []*os.File{r}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		wait += time.Since(t0)
		r.Close()
		comm := fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)
		for {
			if name, _ := os.ReadFile(comm); strings.TrimSpace(string(name)) == "ralph-watchdog" {
				break
			}
			time.Sleep(20 * time.Microsecond)
		}
		b.StopTimer()
		if rss == 0 {
			time.Sleep(100 * time.Millisecond) // blocked on its pipe by then
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
			for _, l := range strings.Split(string(status), "\n") {
				f := strings.Fields(l)
				if len(f) > 1 && f[0] == "VmRSS:" {
					rss, _ = strconv.ParseFloat(f[1], 64)
				}
				if len(f) > 1 && f[0] == "RssAnon:" {
					anon, _ = strconv.ParseFloat(f[1], 64)
				}
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		w.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(wait.Microseconds())/float64(b.N), "wait-µs/op")
	b.ReportMetric(rss, "rss-KB")
	b.ReportMetric(anon, "anon-KB")
}
