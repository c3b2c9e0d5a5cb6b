package claude

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/claude/claudetest"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

func init() {
	extraFakeModes["ignore-term"] = func() int {
		// Ignores SIGTERM, says so, and waits to be killed.
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
		return 0
	}
	extraFakeModes["sweep"] = playSweeper
	extraFakeModes["sweep-parent"] = func() int {
		// Starts the sweeper with its own environment (RALPH_HOLDER
		// included) and waits for it.
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fakeAgentEnv+"=sweep")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "sweep-parent:", err)
			return 1
		}
		return 0
	}
	extraFakeModes["ralph-parent"] = playRalphParent
}

// sweeperReport is what the sweeper mode prints.
type sweeperReport struct {
	Self, Parent int
	Swept        []int
}

// playSweeper runs Sweep and prints which pids it stopped.
func playSweeper() int {
	swept, err := Sweep(context.Background(), time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err)
		return 1
	}
	rep := sweeperReport{Self: os.Getpid(), Parent: os.Getppid()}
	for _, p := range swept.Processes {
		rep.Swept = append(rep.Swept, p.PID)
	}
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
	return 0
}

// The ralph-parent mode's settings: the agent to run (default: this
// binary as the "hang" fake, which ignores SIGTERM and leaves a grandchild
// that does too) and more environment for it (a JSON list).
const (
	envParentAgent = "RALPH_TEST_PARENT_AGENT"
	envParentEnv   = "RALPH_TEST_PARENT_ENV"
)

// playRalphParent plays a ralph that runs an agent with a system prompt
// and reports on stdout the grandchild pid the fake agent reports. The
// test kills it with SIGKILL.
func playRalphParent() int {
	var env []string
	if err := json.Unmarshal([]byte(os.Getenv(envParentEnv)), &env); err != nil {
		env = nil
	}
	path := os.Getenv(envParentAgent)
	if path == "" {
		path = os.Args[0]
		env = append(env, fakeAgentEnv+"=hang", "GORACE=atexit_sleep_ms=0")
	}
	r := &Runner{Path: path, Grace: 500 * time.Millisecond}
	req := loop.RunRequest{
		Prompt:       "do the thing",
		SystemPrompt: "ralph's agent protocol",
		Sandboxed:    true,
		UseAPIKey:    true,
		Env:          append(env, loop.EnvHolder+"="+loop.ThisProcess().String()),
		OnEvent: func(ev loop.Event) {
			if strings.HasPrefix(ev.Text, "grandchild ") {
				fmt.Println(ev.Text)
			}
		},
	}
	_, err := r.Run(context.Background(), req)
	fmt.Fprintln(os.Stderr, "ralph-parent: Run returned:", err)
	return 1
}

// isolateHost gives the test a host identity of its own ($RALPH_HOST_ID,
// inherited by the processes it starts). Sweep judges only holders of its
// own host: the dead holders made here are judged by no other sweep on the
// machine, and the test's sweeps judge no other process.
func isolateHost(t *testing.T) string {
	t.Helper()
	host := fmt.Sprintf("claude-sweep-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Setenv(loop.EnvHostID, host)
	return host
}

// startProcess starts argv with env on top of this process's environment,
// and kills it at the end of the test.
func startProcess(t *testing.T, env []string, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// startIgnoringTerm starts the test binary as a process that ignores
// SIGTERM, with env on top, and returns once it does.
func startIgnoringTerm(t *testing.T, env []string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append([]string{fakeAgentEnv + "=ignore-term", "GORACE=atexit_sleep_ms=0"}, env...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the fake said %q, %v; want ready", line, err)
	}
	return cmd
}

// waitState waits until pid is in state (a /proc/PID/stat state letter).
func waitState(t *testing.T, pid int, state byte) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		if i := strings.LastIndexByte(string(data), ')'); i >= 0 && i+2 < len(data) && data[i+2] == state {
			return
		}
	}
	t.Fatalf("process %d never reached state %c", pid, state)
}

func TestSweep(t *testing.T) {
	host := isolateHost(t)
	t.Setenv("TMPDIR", t.TempDir())
	dead := looptest.DeadHolderOn(t, host)
	self, err := loop.ProcessStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	live := loop.Holder{Host: host, PID: os.Getpid(), Start: self}
	future := dead
	future.Start += 1 << 40 // a holder that started after every process here
	elsewhere := dead
	elsewhere.Host = "another-machine"
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		holder     string // RALPH_HOLDER's value; "" for none
		ignoreTerm bool   // the test binary ignoring SIGTERM, not sleep 60
		stop       bool   // SIGSTOP it before the sweep (state T)
		want       bool   // stopped by the sweep
		killed     bool   // only by SIGKILL
	}{
		{name: "a dead holder's process", holder: dead.String(), want: true},
		{name: "a dead holder's process that ignores SIGTERM: SIGKILL after the grace", holder: dead.String(), ignoreTerm: true, want: true, killed: true},
		// SIGCONT after SIGTERM lets a stopped process go at once.
		{name: "a dead holder's stopped process", holder: dead.String(), stop: true, want: true},
		{name: "a live holder's process (this test)", holder: live.String()},
		{name: "a process older than its dead holder", holder: future.String()},
		{name: "a dead holder on another host", holder: elsewhere.String()},
		{name: "no holder"},
		{name: "a holder that does not parse", holder: "garbage"},
	}
	cmds := make([]*exec.Cmd, len(tests))
	var want []Leftover
	for i, tt := range tests {
		var env []string
		if tt.holder != "" {
			env = append(env, loop.EnvHolder+"="+tt.holder)
		}
		command := sleep + " 60"
		if tt.ignoreTerm {
			cmds[i], command = startIgnoringTerm(t, env), os.Args[0]
		} else {
			cmds[i] = startProcess(t, env, sleep, "60")
		}
		if tt.stop {
			_ = cmds[i].Process.Signal(syscall.SIGSTOP)
			waitState(t, cmds[i].Process.Pid, 'T')
		}
		if tt.want {
			h, _ := loop.ParseHolder(tt.holder)
			want = append(want, Leftover{PID: cmds[i].Process.Pid, Command: command, Holder: h, Killed: tt.killed})
		}
	}
	slices.SortFunc(want, func(a, b Leftover) int { return a.PID - b.PID })

	// The system prompt files: only the dead writer's goes.
	tmp := os.TempDir()
	mkFile := func(name string) string {
		path := filepath.Join(tmp, name)
		if err := os.WriteFile(path, []byte("prompt"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	deadFile := mkFile(strings.Replace(systemPromptPattern(dead), "*", "1", 1))
	kept := []string{
		mkFile(strings.Replace(systemPromptPattern(live), "*", "2", 1)),
		mkFile(strings.Replace(systemPromptPattern(elsewhere), "*", "3", 1)),
		mkFile("ralph-system-prompt-1234.md"),
		mkFile("unrelated.md"),
	}

	start := time.Now()
	swept, err := Sweep(t.Context(), time.Second)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, swept.Processes); diff != "" {
		t.Errorf("processes stopped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{deadFile}, swept.Files); diff != "" {
		t.Errorf("files removed (-want +got):\n%s", diff)
	}
	for i, tt := range tests {
		if gone := processGone(cmds[i].Process.Pid); gone != tt.want {
			t.Errorf("%s: gone after the sweep = %v, want %v", tt.name, gone, tt.want)
		}
	}
	for _, path := range append(kept, deadFile) {
		_, err := os.Stat(path)
		if exists := err == nil; exists != (path != deadFile) {
			t.Errorf("%s exists = %v after the sweep", path, exists)
		}
	}
	// One grace period (1 s) for the process that ignores SIGTERM, and a
	// margin for a busy machine.
	if elapsed > 4*time.Second {
		t.Errorf("Sweep took %v", elapsed)
	}
	t.Logf("Sweep took %v", elapsed)
}

// The sweep never stops the process that runs it, nor its ancestors, even
// when they carry a dead holder's RALPH_HOLDER (a ralph started from a
// shell of a dead ralph's agent).
func TestSweepSparesItselfAndAncestors(t *testing.T) {
	dead := looptest.DeadHolderOn(t, isolateHost(t))
	sibling := startProcess(t, []string{loop.EnvHolder + "=" + dead.String()}, "sleep", "60")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fakeAgentEnv+"=sweep-parent", "GORACE=atexit_sleep_ms=0", loop.EnvHolder+"="+dead.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the sweeper's parent: %v (was it swept?)", err)
	}
	var rep sweeperReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("sweeper said %q: %v", out, err)
	}
	if rep.Parent != cmd.Process.Pid {
		t.Errorf("sweeper's parent %d, want %d", rep.Parent, cmd.Process.Pid)
	}
	if diff := cmp.Diff([]int{sibling.Process.Pid}, rep.Swept); diff != "" {
		t.Errorf("swept (-want +got): the sibling, and neither the sweeper (%d) nor its parent (%d)\n%s", rep.Self, rep.Parent, diff)
	}
}

// When ralph dies by SIGKILL, its agent dies with it (the parent-death
// signal), and the next start's sweep stops what the agent left (a
// grandchild that ignores SIGTERM and carries RALPH_HOLDER) and removes
// the system prompt file the dead ralph could not.
func TestKillNineLeavesNoAgent(t *testing.T) {
	host := isolateHost(t)
	t.Setenv("TMPDIR", t.TempDir())
	mark := "RALPH_TEST_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 36)
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), fakeAgentEnv+"=ralph-parent", "GORACE=atexit_sleep_ms=0", mark)
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = parent.Process.Kill()
		_ = parent.Wait()
	})
	parentStart, err := loop.ProcessStart(parent.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	holder := loop.Holder{Host: host, PID: parent.Process.Pid, Start: parentStart}

	// The agent runs once it has reported its grandchild.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	grandchild, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "grandchild ")))
	if err != nil || grandchild == 0 {
		t.Fatalf("ralph-parent said %q, %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	var agent int
	for _, pid := range claudetest.ProcessesWithEnv(mark) {
		if pid != parent.Process.Pid && pid != grandchild {
			agent = pid
		}
	}
	if agent == 0 {
		t.Fatal("no agent process found")
	}
	t.Cleanup(func() { _ = syscall.Kill(agent, syscall.SIGKILL) })
	files, _ := filepath.Glob(filepath.Join(os.TempDir(), systemPromptPattern(holder)))
	if len(files) != 1 {
		t.Fatalf("system prompt files named after the ralph: %v, want one", files)
	}

	// kill -9 ralph.
	_ = parent.Process.Kill()
	_ = parent.Wait()
	killed := time.Now()
	for !processGone(agent) && time.Since(killed) < 5*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if !processGone(agent) {
		t.Fatalf("the agent (pid %d) outlived ralph by 5 s", agent)
	}
	t.Logf("the agent was gone %v after ralph's SIGKILL", time.Since(killed))

	// The grandchild left the agent's reach (no parent-death signal for
	// it) but not the sweep's.
	if processGone(grandchild) {
		t.Fatal("the grandchild is gone already: the sweep has nothing to show")
	}
	swept, err := Sweep(t.Context(), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := Swept{
		Processes: []Leftover{{PID: grandchild, Command: os.Args[0], Holder: holder, Killed: true}},
		Files:     files,
	}
	if diff := cmp.Diff(want, swept); diff != "" {
		t.Errorf("Sweep (-want +got):\n%s", diff)
	}
	if !processGone(grandchild) {
		t.Errorf("the grandchild (pid %d) survived the sweep", grandchild)
	}
}

// The real Claude Code dies with a ralph killed by SIGKILL too: nothing in
// it undoes the parent-death signal.
func TestE2EKillNineLeavesNoAgent(t *testing.T) {
	path := claudetest.Binary(t)
	api := claudetest.NewAPI(t, func(claudetest.Request) claudetest.Reply {
		return claudetest.Reply{Blocks: []claudetest.Block{{Text: "Partial answer"}, {Text: "never sent"}}, Stop: "end_turn", StallAt: 2}
	})
	host := isolateHost(t)
	t.Setenv("TMPDIR", t.TempDir())
	agentEnv, _ := json.Marshal(api.Env(t.TempDir()))
	parent := exec.Command(os.Args[0])
	parent.Dir = t.TempDir()
	parent.Env = append(os.Environ(), fakeAgentEnv+"=ralph-parent", "GORACE=atexit_sleep_ms=0",
		envParentAgent+"="+path, envParentEnv+"="+string(agentEnv))
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		for _, pid := range claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL=" + api.URL) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	parentStart, err := loop.ProcessStart(parent.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	holder := loop.Holder{Host: host, PID: parent.Process.Pid, Start: parentStart}
	select {
	case <-api.Stalled: // the CLI is mid-request
	case <-time.After(30 * time.Second):
		t.Fatal("the CLI never called the API")
	}
	agents := claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL=" + api.URL)
	if len(agents) == 0 {
		t.Fatal("no agent process found")
	}

	_ = parent.Process.Kill()
	_ = parent.Wait()
	killed := time.Now()
	for len(claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL="+api.URL)) > 0 && time.Since(killed) < 5*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if left := claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL=" + api.URL); len(left) > 0 {
		t.Fatalf("processes %v (agent: %v) outlived ralph by 5 s", left, agents)
	}
	t.Logf("the CLI was gone %v after ralph's SIGKILL", time.Since(killed))

	// Nothing left to stop; the system prompt file to remove.
	files, _ := filepath.Glob(filepath.Join(os.TempDir(), systemPromptPattern(holder)))
	if len(files) != 1 {
		t.Fatalf("system prompt files named after the ralph: %v, want one", files)
	}
	swept, err := Sweep(t.Context(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Swept{Files: files}, swept); diff != "" {
		t.Errorf("Sweep (-want +got):\n%s", diff)
	}
}

// BenchmarkSweep measures a sweep that finds nothing, which is what every
// start of ralph pays: one pass over /proc, the environment of each of
// this user's processes read. (A host identity of its own, so that it
// stops nothing on the machine.)
func BenchmarkSweep(b *testing.B) {
	b.Setenv(loop.EnvHostID, fmt.Sprintf("claude-sweep-bench-%d", os.Getpid()))
	b.Setenv("TMPDIR", b.TempDir())
	entries, _ := os.ReadDir("/proc")
	procs := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			procs++
		}
	}
	for b.Loop() {
		if _, err := Sweep(b.Context(), time.Second); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(procs), "processes")
}
