package agentproc

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
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

func init() {
	fakeModes["ignore-term"] = func() int {
		// Ignores SIGTERM, says so, and waits to be killed.
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
		return 0
	}
	fakeModes["sweep"] = playSweeper
	fakeModes["sweep-parent"] = func() int {
		// Starts the sweeper with its own environment (RALPH_HOLDER
		// included) and waits for it.
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fakeEnv+"=sweep")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "sweep-parent:", err)
			return 1
		}
		return 0
	}
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

// isolateHost gives the test a host identity of its own ($RALPH_HOST_ID,
// inherited by the processes it starts). Sweep judges only holders of its
// own host: the dead holders made here are judged by no other sweep on the
// machine, and the test's sweeps judge no other process.
func isolateHost(t *testing.T) string {
	t.Helper()
	host := fmt.Sprintf("agentproc-sweep-test-%d-%d", os.Getpid(), time.Now().UnixNano())
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
	cmd.Env = append(os.Environ(), append([]string{fakeEnv + "=ignore-term", "GORACE=atexit_sleep_ms=0"}, env...)...)
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
	deadFile := mkFile(strings.Replace(tempPattern("system-prompt", ".md", dead), "*", "1", 1))
	deadConfig := mkFile(strings.Replace(tempPattern("config", ".json", dead), "*", "4", 1))
	kept := []string{
		mkFile(strings.Replace(tempPattern("system-prompt", ".md", live), "*", "2", 1)),
		mkFile(strings.Replace(tempPattern("system-prompt", ".md", elsewhere), "*", "3", 1)),
		mkFile("ralph-system-prompt-1234.md"),
		mkFile("unrelated.md"),
	}

	// The sandbox's scratch directories: only the dead writer's goes,
	// whole, an unreadable directory the agent left in it included.
	mkDir := func(name string) string {
		path := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(path, "tmp", "locked", "deep"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(path, "tmp", "locked"), 0); err != nil {
			t.Fatal(err)
		}
		return path
	}
	deadScratch := mkDir(strings.Replace(tempPattern("sandbox", "", dead), "*", "5", 1))
	kept = append(kept,
		mkDir(strings.Replace(tempPattern("sandbox", "", live), "*", "6", 1)),
		mkDir(strings.Replace(tempPattern("config", "", dead), "*", "7", 1))) // no directory of that kind is ralph's
	t.Cleanup(func() {
		for _, k := range kept {
			_ = os.Chmod(filepath.Join(k, "tmp", "locked"), 0o755)
		}
	})

	start := time.Now()
	swept, err := Sweep(t.Context(), time.Second)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, swept.Processes); diff != "" {
		t.Errorf("processes stopped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{deadConfig, deadFile, deadScratch}, swept.Files, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("files removed (-want +got):\n%s", diff)
	}
	for i, tt := range tests {
		if gone := processGone(cmds[i].Process.Pid); gone != tt.want {
			t.Errorf("%s: gone after the sweep = %v, want %v", tt.name, gone, tt.want)
		}
	}
	for _, path := range append(kept, deadFile, deadConfig, deadScratch) {
		_, err := os.Stat(path)
		if exists := err == nil; exists != (path != deadFile && path != deadConfig && path != deadScratch) {
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
	cmd.Env = append(os.Environ(), fakeEnv+"=sweep-parent", "GORACE=atexit_sleep_ms=0", loop.EnvHolder+"="+dead.String())
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

// BenchmarkSweep measures a sweep that finds nothing, which is what every
// start of ralph pays: one pass over /proc, the environment of each of
// this user's processes read. (A host identity of its own, so that it
// stops nothing on the machine.)
func BenchmarkSweep(b *testing.B) {
	b.Setenv(loop.EnvHostID, fmt.Sprintf("agentproc-sweep-bench-%d", os.Getpid()))
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
