package agentproc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// processesIn returns the live processes whose working directory is dir
// (every process an agent run in dir starts inherits it).
func processesIn(dir string) []int {
	return processesWhere(func(proc string) bool {
		cwd, err := os.Readlink(proc + "/cwd")
		return err == nil && cwd == dir
	})
}

// processesWhere returns the live processes for whose /proc/PID
// directory keep says yes.
func processesWhere(keep func(proc string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if keep("/proc/"+e.Name()) && !processGone(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// checkNothingLeft fails the test if a process runs in dir, or if one of
// files appears there within 4 s (the detached processes write them after
// 3 s).
func checkNothingLeft(t *testing.T, dir string, files ...string) {
	t.Helper()
	if pids := processesIn(dir); len(pids) > 0 {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("processes left after Run: %v", pids)
	}
	time.Sleep(4 * time.Second)
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was written after Run returned", f)
		}
	}
}

// detachings are the ways an agent's process detaches: a session of its
// own (setsid), a double fork with nohup, a cleared environment (env -i:
// no marker; it holds the agent's standard output), and one that ignores
// SIGTERM. Each writes late.txt after 3 s unless stopped.
var detachings = []struct {
	name   string
	script string
}{
	{name: "setsid", script: `setsid sh -c 'sleep 3; echo late > late.txt' &`},
	{name: "double fork, nohup, output elsewhere", script: `(setsid nohup sh -c 'sleep 3; echo late > late.txt' >/dev/null 2>&1 &) ; echo forked`},
	{name: "setsid, then env -i", script: `setsid sh -c 'exec env -i sh -c "sleep 3; echo late > late.txt"' &`},
	{name: "a process that ignores SIGTERM", script: `setsid sh -c 'trap "" TERM; sleep 3; echo late > late.txt' &`},
}

// An agent that detaches a process and exits at once leaves nothing
// behind, however the process detached.
func TestRunReapsDetached(t *testing.T) {
	for _, tt := range detachings {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var evs events
			s := shSpec(t, "echo agent $$\n"+tt.script+"\necho result", &evs)
			start := time.Now()
			exit, err := Run(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Run took %v; %q", time.Since(start), evs.texts(loop.EventText))
			if exit.ExitCode != 0 || exit.Stop != StopNone {
				t.Errorf("exit code %d, stop %v: the agent did not exit by itself", exit.ExitCode, exit.Stop)
			}
			checkNothingLeft(t, s.Dir, "late.txt")
		})
	}
}

// Many such runs at once leave nothing behind either. Caught in the middle
// of its exec, a detached process shows no marker yet; the reap once
// trusted a pass that saw only such a process, and left it running (this
// test failed 4 times in 20 against that code).
func TestRunReapsDetachedConcurrently(t *testing.T) {
	const workers, runs = 6, 8
	type run struct {
		name string
		spec Spec
		evs  *events
	}
	queues := make([][]run, workers)
	for w := range queues {
		for i := range runs {
			tt := detachings[(w+i)%len(detachings)]
			r := run{name: tt.name, evs: new(events)}
			r.spec = shSpec(t, "echo agent $$\n"+tt.script+"\necho result", r.evs)
			queues[w] = append(queues[w], r)
		}
	}
	var wg sync.WaitGroup
	for _, queue := range queues {
		wg.Go(func() {
			for _, r := range queue {
				if _, err := Run(t.Context(), r.spec); err != nil {
					t.Error(err)
					return
				}
				if pids := processesIn(r.spec.Dir); len(pids) > 0 {
					for _, pid := range pids {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
					t.Errorf("%s: processes left after Run: %v", r.name, pids)
				}
			}
		})
	}
	wg.Wait()
}

// A run that is cancelled stops every descendant of its agent, one that
// cleared its environment and sent its output elsewhere too (the agent's
// tree, recorded when it was stopped, names it).
func TestRunCancelReapsDetached(t *testing.T) {
	var evs events
	s := shSpec(t, `setsid sh -c 'sleep 3; echo late > late.txt' &
setsid env -i sh -c 'sleep 3; echo late > late2.txt' >/dev/null 2>&1 </dev/null &
sleep 0.2; echo started; sleep 60`, &evs)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var once sync.Once
	s.OnEvent = func(ev loop.Event) { evs.add(ev); once.Do(cancel) }
	exit, err := Run(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Stop != StopCancel {
		t.Errorf("stop %v, want cancel", exit.Stop)
	}
	checkNothingLeft(t, s.Dir, "late.txt", "late2.txt")
}

// Two runs at once: the one that ends stops its own processes only; the
// other's detached process — an orphan re-parented to this process, with
// its environment cleared, started after the first agent — lives until
// its own run ends.
func TestRunConcurrentRunsKeepTheirOwn(t *testing.T) {
	var evsA, evsB events
	a := shSpec(t, `setsid sh -c 'sleep 3; echo late > late.txt' & sleep 1; echo result`, &evsA)
	b := shSpec(t, `(setsid sh -c 'exec env -i sleep 30' &); echo ready; sleep 3; echo result`, &evsB)
	doneA := make(chan Exit, 1)
	go func() {
		exit, err := Run(t.Context(), a)
		if err != nil {
			t.Error(err)
		}
		doneA <- exit
	}()
	time.Sleep(200 * time.Millisecond) // B's processes start after A's agent
	doneB := make(chan Exit, 1)
	go func() {
		exit, err := Run(t.Context(), b)
		if err != nil {
			t.Error(err)
		}
		doneB <- exit
	}()
	<-doneA
	select {
	case <-doneB:
		t.Fatal("B ended before A: the test proves nothing")
	default:
	}
	left := processesIn(b.Dir)
	var orphan bool
	for _, pid := range left {
		if data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); string(data) == "sleep\x0030\x00" {
			orphan = true
		}
	}
	if !orphan {
		t.Errorf("B's detached sleep 30 is gone after A's run ended (B's processes: %v)", left)
	}
	if pids := processesIn(a.Dir); len(pids) > 0 {
		t.Errorf("A's processes left after A's run: %v", pids)
	}
	<-doneB
	checkNothingLeft(t, b.Dir)
	if _, err := os.Stat(filepath.Join(a.Dir, "late.txt")); err == nil {
		t.Error("A's detached process wrote late.txt")
	}
}

// BenchmarkReapNothingLeft measures what every run pays after its agent
// exits when it left nothing behind: one pass over /proc (the stat of
// every process, the environment of those younger than the agent).
func BenchmarkReapNothingLeft(b *testing.B) {
	becomeSubreaper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	f := newFamily(cmd.Process.Pid, newMarker())
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	entries, _ := os.ReadDir("/proc")
	procs := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			procs++
		}
	}
	for b.Loop() {
		f.reap(time.Now().Add(time.Second), false)
	}
	b.ReportMetric(float64(procs), "processes")
}
