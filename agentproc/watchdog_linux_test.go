package agentproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/agentproc/agentproctest"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

// envRalphPlay is the play of the test binary's "ralph" part (JSON).
const envRalphPlay = "RALPH_AGENTPROC_TEST_RALPH"

// ralphPlay is what the test binary does as ralph: the runs it starts at
// once, each a shell script in a directory of its own.
type ralphPlay struct {
	Runs    []ralphRun
	Grace   time.Duration
	Holder  bool // the agents get RALPH_HOLDER, as the loop gives it
	Sandbox bool // each agent runs in bubblewrap
	NoDog   bool // no watchdog: how it was before there was one
}

type ralphRun struct{ Dir, Script string }

func init() {
	fakeModes["ralph"] = playRalph
}

// playRalph is the test binary as ralph: it starts the runs of its play
// at once, says "watchdog PID" (0 for none) once the first has started,
// and exits once they have all ended.
func playRalph() int {
	var play ralphPlay
	if err := json.Unmarshal([]byte(os.Getenv(envRalphPlay)), &play); err != nil {
		fmt.Fprintln(os.Stderr, "ralph play:", err)
		return 2
	}
	if play.NoDog {
		dog.mu.Lock()
		dog.retry = time.Now().Add(time.Hour)
		dog.mu.Unlock()
	}
	var sb *sandbox.Sandbox
	if play.Sandbox {
		var err error
		if sb, err = sandbox.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "ralph play:", err)
			return 2
		}
	}
	env := withoutKey(os.Environ(), fakeEnv, envRalphPlay)
	if play.Holder {
		env = append(env, loop.EnvHolder+"="+loop.ThisProcess().String())
	}
	var wg sync.WaitGroup
	failed := make(chan error, len(play.Runs))
	for _, r := range play.Runs {
		wg.Go(func() {
			var box *sandbox.Boundary
			if sb != nil {
				var err error
				if box, err = sb.Boundary(sandbox.BoundaryParams{Root: r.Dir, Env: env}); err != nil {
					failed <- err
					return
				}
			}
			_, err := Run(context.Background(), Spec{
				Name: "agent", Path: "/bin/sh", Args: []string{"-c", r.Script},
				Dir: r.Dir, Env: env, Grace: play.Grace, Sandbox: box,
			})
			if err != nil {
				failed <- err
			}
		})
	}
	pid := 0
	for deadline := time.Now().Add(10 * time.Second); !play.NoDog && pid == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		pid = watchdogPID()
	}
	fmt.Printf("watchdog %d\n", pid)
	wg.Wait()
	close(failed)
	for err := range failed {
		fmt.Fprintln(os.Stderr, "ralph play:", err)
		return 1
	}
	return 0
}

// watchdogPID is the pid of this process's watchdog, 0 when none runs.
func watchdogPID() int {
	dog.mu.Lock()
	defer dog.mu.Unlock()
	if dog.cmd == nil {
		return 0
	}
	return dog.cmd.Process.Pid
}

// withoutKey drops the entries of env named by keys.
func withoutKey(env []string, keys ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(keys, k)
	})
}

// detachedPayload is what an agent starts, every way a process outlives
// its parent, then it says ready and works on: a Bash tool's command in
// its process group; `setsid nohup … &`; a double-forked daemon that
// went to /; one that ignores SIGTERM; one that cleared its environment
// but stayed in the group; one that cleared its environment and left the
// group, but holds the agent's standard output. Each of them would write
// late.txt after 3 s.
const detachedPayload = `sleep 1000 &
setsid nohup sh -c 'sleep 3; echo late > late.txt; sleep 1000' >/dev/null 2>&1 &
(cd / && setsid sh -c 'sleep 3; echo late > "$0/late.txt"; sleep 1000' "$PWD" </dev/null >/dev/null 2>&1 &)
setsid sh -c 'trap "" TERM; sleep 3; echo late > late.txt; sleep 1000' </dev/null >/dev/null 2>&1 &
env -i sh -c 'sleep 3; echo late > late.txt; sleep 1000' </dev/null >/dev/null 2>&1 &
setsid sh -c 'exec env -i sh -c "sleep 3; echo late > late.txt; sleep 1000"' &
sleep 0.2
touch ready
sleep 1000
`

// killedRalph is a test binary playing ralph, killed with SIGKILL while
// its agents work.
type killedRalph struct {
	cmd      *exec.Cmd
	watchdog int
	token    string   // in the environment of every process of the play
	dirs     []string // the runs' directories
	procs    map[int]int64
}

// startRalph starts the test binary as ralph with play (its runs' Dirs
// made here, the payload as their Script where none is given), and
// returns once every agent has said ready, with the processes of the
// runs then.
func startRalph(t *testing.T, play ralphPlay) *killedRalph {
	t.Helper()
	k := &killedRalph{token: fmt.Sprintf("RALPH_TEST_TOKEN=%d-%d", os.Getpid(), time.Now().UnixNano()), procs: map[int]int64{}}
	for i := range play.Runs {
		if play.Runs[i].Dir == "" {
			play.Runs[i].Dir = t.TempDir()
		}
		if play.Runs[i].Script == "" {
			play.Runs[i].Script = detachedPayload
		}
		k.dirs = append(k.dirs, play.Runs[i].Dir)
	}
	b, _ := json.Marshal(play)
	k.cmd = exec.Command(os.Args[0])
	// A host identity of its own: no sweep of another ralph on the
	// machine judges its holder, so only its own watchdog can stop what
	// it leaves.
	k.cmd.Env = append(os.Environ(), fakeEnv+"=ralph", envRalphPlay+"="+string(b), k.token,
		loop.EnvHostID+"=agentproc-watchdog-test-"+k.token, "GORACE=atexit_sleep_ms=0")
	k.cmd.Stderr = os.Stderr
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.cmd.Process.Kill()
		_ = k.cmd.Wait()
		for pid := range k.processes() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, err := fmt.Sscanf(line, "watchdog %d", &k.watchdog); err != nil {
		t.Fatalf("ralph said %q: %v", line, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ready := 0
		for _, d := range k.dirs {
			if _, err := os.Stat(filepath.Join(d, "ready")); err == nil {
				ready++
			}
		}
		if ready == len(k.dirs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d agents ready after 20 s", ready, len(k.dirs))
		}
	}
	k.procs = k.processes()
	return k
}

// processes returns the live processes of the play (ralph and its
// watchdog aside) with their start times: those that carry the token in
// their environment, and those that work in a run's directory.
func (k *killedRalph) processes() map[int]int64 {
	pids := agentproctest.ProcessesWithEnv(k.token)
	for _, d := range k.dirs {
		pids = append(pids, processesIn(d)...)
	}
	out := map[int]int64{}
	for _, pid := range pids {
		if pid == k.cmd.Process.Pid || pid == k.watchdog {
			continue
		}
		if start, err := loop.ProcessStart(pid); err == nil {
			out[pid] = start
		}
	}
	return out
}

// kill sends ralph SIGKILL and returns when it is gone.
func (k *killedRalph) kill(t *testing.T) time.Time {
	t.Helper()
	if err := k.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = k.cmd.Wait()
	return time.Now()
}

// left returns the processes of the play that still run: those seen
// before the kill (the same start time), and any the play shows now.
func (k *killedRalph) left() []int {
	var pids []int
	for pid, start := range k.procs {
		if s, err := loop.ProcessStart(pid); err == nil && s == start {
			pids = append(pids, pid)
		}
	}
	for pid := range k.processes() {
		if !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// describe names pids with their command lines.
func describe(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		fmt.Fprintf(&b, "\n  %d %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
	}
	return b.String()
}

// waitGone waits until nothing of the play runs, the watchdog included,
// up to within after the kill, and fails the test otherwise; it then
// checks that nothing wrote late.txt. It returns how long it took.
func (k *killedRalph) waitGone(t *testing.T, killed time.Time, within time.Duration) time.Duration {
	t.Helper()
	for {
		left := k.left()
		dogAlive := k.watchdog != 0 && !processGone(k.watchdog)
		took := time.Since(killed)
		if len(left) == 0 && !dogAlive {
			// The processes would have written late.txt 3 s after they
			// started.
			time.Sleep(max(0, 3500*time.Millisecond-took))
			for _, d := range k.dirs {
				if _, err := os.Stat(filepath.Join(d, "late.txt")); err == nil {
					t.Errorf("%s: late.txt was written after ralph was killed", d)
				}
			}
			return took
		}
		if took > within {
			t.Fatalf("%v after ralph was killed, still running:%s\n  watchdog %d alive: %v", took.Round(time.Millisecond), describe(left), k.watchdog, dogAlive)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The expected processes of one run of detachedPayload, at least: the
// agent's sleep 1000, its background sleep, and the six detached ones
// with their sleeps.
const payloadProcesses = 8

// kill -9 of ralph while its agent works: nothing the agent started
// outlives it by more than the grace period and a little, whether it
// stayed in the agent's process group or not, without another ralph
// starting. Without RALPH_HOLDER (a library user's runner, no loop) the
// run's marker, group and pipes find them; with it, the holder too. And
// without the watchdog (the control), they live on.
func TestWatchdogKillNine(t *testing.T) {
	const grace = time.Second
	tests := []struct {
		name   string
		play   ralphPlay
		within time.Duration // after the kill: nothing left
		live   bool          // the control: they outlive ralph
	}{
		{name: "one run", play: ralphPlay{Runs: make([]ralphRun, 1), Grace: grace}, within: grace + 3*time.Second},
		{name: "one run, RALPH_HOLDER", play: ralphPlay{Runs: make([]ralphRun, 1), Grace: grace, Holder: true}, within: grace + 3*time.Second},
		{name: "concurrent runs (workers)", play: ralphPlay{Runs: make([]ralphRun, 3), Grace: grace, Holder: true}, within: grace + 3*time.Second},
		{name: "without the watchdog", play: ralphPlay{Runs: make([]ralphRun, 1), Grace: grace, NoDog: true}, live: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := startRalph(t, tt.play)
			if n := len(k.procs); n < payloadProcesses*len(tt.play.Runs) {
				t.Fatalf("%d processes before the kill, want at least %d:%s", n, payloadProcesses*len(tt.play.Runs), describe(slices.Sorted(maps.Keys(k.procs))))
			}
			killed := k.kill(t)
			if tt.live {
				time.Sleep(2 * time.Second)
				if left := k.left(); len(left) < payloadProcesses-2 {
					t.Errorf("without a watchdog, %d processes outlived ralph (want most of the %d: the agent and its group's sleep die of the parent-death signal):%s", len(left), len(k.procs), describe(left))
				}
				return
			}
			took := k.waitGone(t, killed, tt.within)
			t.Logf("%d processes, all gone %v after the kill (grace %v)", len(k.procs), took.Round(time.Millisecond), grace)
		})
	}
}

// --sandbox: bubblewrap's pid namespace and --die-with-parent take the
// sandbox down when ralph is killed, and the watchdog is there too.
func TestWatchdogKillNineSandboxed(t *testing.T) {
	sandboxOrSkip(t)
	k := startRalph(t, ralphPlay{Runs: make([]ralphRun, 2), Grace: time.Second, Holder: true, Sandbox: true})
	if n := len(k.procs); n < payloadProcesses*2 {
		t.Fatalf("%d processes before the kill, want at least %d:%s", n, payloadProcesses*2, describe(slices.Sorted(maps.Keys(k.procs))))
	}
	took := k.waitGone(t, k.kill(t), 4*time.Second)
	t.Logf("%d processes, all gone %v after the kill", len(k.procs), took.Round(time.Millisecond))
}

// A ralph that ends normally leaves no watchdog behind: it exits at once,
// and stops nothing.
func TestWatchdogNormalExit(t *testing.T) {
	k := startRalph(t, ralphPlay{Runs: []ralphRun{{Script: "touch ready; echo result"}}, Grace: time.Second, Holder: true})
	if k.watchdog == 0 {
		t.Fatal("no watchdog")
	}
	// An unrelated process that carries another run's marker and another
	// holder: the watchdog must not touch it.
	other := startProcess(t, []string{EnvRun + "=" + newMarker(), loop.EnvHolder + "=1:1@elsewhere"}, "sleep", "60")
	if err := k.cmd.Wait(); err != nil {
		t.Fatalf("ralph: %v", err)
	}
	ended := time.Now()
	for !processGone(k.watchdog) {
		if time.Since(ended) > 2*time.Second {
			t.Fatalf("the watchdog %d still runs 2 s after ralph ended", k.watchdog)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the watchdog exited %v after ralph", time.Since(ended).Round(time.Microsecond))
	if processGone(other.Process.Pid) {
		t.Error("the watchdog stopped an unrelated process")
	}
}

// The watchdog is not one of the agent's processes: a run's reap does not
// stop it, a sweep does not take it for a leftover, and it does not hold
// the agent's pipes. It ignores the signals of a terminal, and it runs in
// a session of its own under its own name.
func TestWatchdogIsNotTheAgents(t *testing.T) {
	var evs events
	s := shSpec(t, `echo result`, &evs)
	if _, err := Run(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	pid := watchdogPID()
	if pid == 0 {
		t.Fatal("no watchdog after a run")
	}
	start, err := loop.ProcessStart(pid)
	if err != nil {
		t.Fatalf("the watchdog is gone after a run: %v", err)
	}
	if _, err := Run(t.Context(), shSpec(t, `sleep 0.1; echo result`, &evs)); err != nil {
		t.Fatal(err)
	}
	if again, err := loop.ProcessStart(pid); err != nil || again != start || watchdogPID() != pid {
		t.Fatalf("the watchdog %d did not outlive a second run: %v", pid, err)
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		k, _, _ := strings.Cut(kv, "=")
		if k == EnvRun || k == loop.EnvHolder {
			t.Errorf("the watchdog's environment has %s", kv)
		}
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != watchdogArg0 {
		t.Errorf("the watchdog is called %q", comm)
	}
	if sid, _ := unixGetsid(pid); sid != pid {
		t.Errorf("the watchdog's session is %d, want its own (%d)", sid, pid)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		_ = syscall.Kill(pid, sig)
	}
	time.Sleep(100 * time.Millisecond)
	if again, err := loop.ProcessStart(pid); err != nil || again != start {
		t.Errorf("the watchdog died of SIGINT, SIGTERM or SIGHUP: %v", err)
	}
}

func unixGetsid(pid int) (int, error) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(sid), nil
}

// A watchdog that something killed (an agent's `pkill ralph`) is
// replaced while a run needs one — a second after its start at the
// soonest — and the new one knows the run: kill -9 of ralph then still
// leaves nothing.
func TestWatchdogReplaced(t *testing.T) {
	k := startRalph(t, ralphPlay{Runs: make([]ralphRun, 1), Grace: time.Second})
	if err := syscall.Kill(k.watchdog, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first := k.watchdog
	k.watchdog = 0
	for deadline := time.Now().Add(5 * time.Second); k.watchdog == 0; time.Sleep(10 * time.Millisecond) {
		for _, pid := range processesNamed(watchdogArg0) {
			if ppid(pid) == k.cmd.Process.Pid && pid != first {
				k.watchdog = pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no new watchdog 5 s after the first was killed")
		}
	}
	k.procs = k.processes()
	took := k.waitGone(t, k.kill(t), 4*time.Second)
	t.Logf("all gone %v after the kill, with the second watchdog", took.Round(time.Millisecond))
}

// processesNamed returns the live processes whose comm is name.
func processesNamed(name string) []int {
	return processesWhere(func(proc string) bool {
		comm, err := os.ReadFile(proc + "/comm")
		return err == nil && strings.TrimSpace(string(comm)) == name
	})
}

// ppid is the parent of pid (0 when it cannot be read).
func ppid(pid int) int {
	f := &family{buf: make([]byte, 0, 1024)}
	info, ok := f.stat(pid)
	if !ok {
		return 0
	}
	return info.ppid
}

// A watchdog that ralph lets go of (it stopped reading) exits doing
// nothing when its pipe ends while ralph lives: the run it was told of
// goes on.
func TestWatchdogLetGo(t *testing.T) {
	var evs events
	// exec: one agent process from the start, so that the processes
	// counted right after "started" are all there will be (a shell
	// that forks its sleep may not have forked yet).
	s := shSpec(t, `echo started; exec sleep 60`, &evs)
	started := make(chan struct{})
	var once sync.Once
	s.OnEvent = func(ev loop.Event) { evs.add(ev); once.Do(func() { close(started) }) }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := Run(ctx, s); err != nil {
			t.Error(err)
		}
	}()
	<-started
	pid := watchdogPID()
	agents := processesIn(s.Dir)
	if pid == 0 || len(agents) == 0 {
		t.Fatalf("watchdog %d, agent processes %v", pid, agents)
	}
	dog.mu.Lock()
	dog.letGo()
	dog.mu.Unlock()
	for deadline := time.Now().Add(parentWait + 2*time.Second); !processGone(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the watchdog let go of still runs")
		}
	}
	if left := processesIn(s.Dir); !slices.Equal(left, agents) {
		t.Errorf("the agent's processes were %v, are %v after the watchdog was let go of", agents, left)
	}
	cancel()
	<-done
}

// A watchdog that stops reading (SIGSTOP) is let go once a write has
// waited writeWait on its full pipe, and another takes over; the stopped
// one, continued, finds ralph alive at the end of its pipe and exits doing
// nothing.
func TestWatchdogStoppedIsReplaced(t *testing.T) {
	live := watchRun(newMarker(), time.Second) // a run that needs a watchdog
	defer live.end()
	old := watchdogPID()
	if old == 0 {
		t.Fatal("no watchdog")
	}
	if err := syscall.Kill(old, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(old, syscall.SIGCONT)
	waitState(t, old, 'T')
	start := time.Now()
	for watchdogPID() == old {
		if time.Since(start) > 20*time.Second {
			t.Fatal("the stopped watchdog was not replaced in 20 s")
		}
		watchRun(newMarker(), time.Second).end() // two lines
	}
	t.Logf("replaced after %v", time.Since(start).Round(time.Millisecond))
	if pid := watchdogPID(); pid == 0 || processGone(pid) {
		t.Fatalf("no watchdog runs after the stopped one was let go (%d)", pid)
	}
	_ = syscall.Kill(old, syscall.SIGCONT)
	for deadline := time.Now().Add(parentWait + 2*time.Second); !processGone(old); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watchdog let go of still runs once continued")
		}
	}
}

// BenchmarkWatchdogStart measures what a ralph process pays once, at its
// first run, for its watchdog: ns/op is the whole start, until the
// watchdog runs its own code (this program run again, through the
// package initializers before agentproc's); wait-µs/op is the part the
// run waits for (until the exec has succeeded), the rest happening on
// the watchdog's side while ralph goes on.
func BenchmarkWatchdogStart(b *testing.B) {
	var wait time.Duration
	for b.Loop() {
		dog.mu.Lock()
		dog.retry = time.Time{}
		t0 := time.Now()
		dog.start()
		wait += time.Since(t0)
		cmd := dog.cmd
		dog.mu.Unlock()
		if cmd == nil {
			b.Fatal("no watchdog started")
		}
		comm := fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)
		for {
			if name, _ := os.ReadFile(comm); strings.TrimSpace(string(name)) == watchdogArg0 {
				break
			}
			time.Sleep(20 * time.Microsecond)
		}
		b.StopTimer()
		_ = cmd.Process.Kill()
		for !errors.Is(syscall.Kill(cmd.Process.Pid, 0), syscall.ESRCH) {
			time.Sleep(50 * time.Microsecond)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(wait.Microseconds())/float64(b.N), "wait-µs/op")
}

// BenchmarkWatchdogRun measures what each run pays for the watchdog: the
// three lines that tell it of the run (before its agent starts, once it
// has started, once it has ended).
func BenchmarkWatchdogRun(b *testing.B) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	f := newFamily(cmd.Process.Pid, newMarker())
	_ = cmd.Wait()
	f.pipes = []string{"pipe:[123456]", "pipe:[123457]"}
	watchRun(newMarker(), time.Second).end() // the watchdog started
	if watchdogPID() == 0 {
		b.Fatal("no watchdog")
	}
	for b.Loop() {
		w := watchRun(newMarker(), time.Second)
		w.started(f)
		w.end()
	}
}
