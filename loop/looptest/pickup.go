package looptest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// The pickup of a task is how long a loop that waits for other agents
// takes to start it once its last blocker is done (DESIGN §17): from the
// moment the blocker's completion is asked of the store to the moment
// the waiting loop hands the task to its runner — the completion's
// commit, the store's word to the waiting loop (a notification, a file
// that changed), and the loop's claim and iteration setup. Every store
// is measured with the same harness: PickupPlan, WaitingLoop, Pickup.

// Started is a task a waiting loop started, and when its runner got it.
type Started struct {
	TaskID string
	At     time.Time
}

// PickupBy is the agent that holds the blockers Pickup completes.
const PickupBy = "agent-pickupbench"

// PickupPlan returns the plan Pickup measures on: n pairs of tasks,
// "b-<i>" blocked by "a-<i>".
func PickupPlan(n int) []Seed {
	seeds := make([]Seed, 0, 2*n)
	for i := range n {
		a, b := fmt.Sprintf("a-%d", i), fmt.Sprintf("b-%d", i)
		seeds = append(seeds,
			Seed{ID: a, Title: "blocker " + a, Priority: 2},
			Seed{ID: b, Title: "waits for " + a, Priority: 2, BlockedBy: []string{a}})
	}
	return seeds
}

// ClaimBlockers claims every "a-<i>" of PickupPlan(n) for PickupBy, held
// by this process, so that a loop started afterwards finds nothing ready
// and waits for them.
func ClaimBlockers(ctx context.Context, store loop.TaskStore, n int) error {
	for i := range n {
		_, err := store.Claim(ctx, loop.ClaimParams{TaskID: fmt.Sprintf("a-%d", i), Agent: PickupBy,
			Holder: loop.ThisProcess(), Mode: loop.ClaimLoop, Lease: time.Hour})
		if err != nil {
			return fmt.Errorf("claiming a-%d: %w", i, err)
		}
	}
	return nil
}

// WaitingLoop runs a build loop (loop.Run, agent id agent, its logs
// under dir) on store until the plan is done or ctx ends. Its runner
// calls started with each task it is given, then finishes the task at
// once. On a plan of PickupPlan whose blockers ClaimBlockers took, the
// loop waits for them, as a worker of a fleet waits for the others.
func WaitingLoop(ctx context.Context, store loop.TaskStore, dir, agent string, started func(Started)) error {
	run := loop.RunnerFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		at := time.Now()
		var id string
		for _, kv := range req.Env {
			if v, ok := strings.CutPrefix(kv, "RALPH_TASK_ID="); ok {
				id = v
			}
		}
		started(Started{TaskID: id, At: at})
		return loop.RunResult{Class: loop.ClassSuccess, Text: "<task-done>" + id + "</task-done>", Turns: 1}, nil
	})
	cfg := loop.DefaultConfig(dir)
	cfg.AgentID, cfg.Session, cfg.SessionLog, cfg.RawLogs = agent, "pickup", false, false
	cfg.MaxIterations = 1 << 20
	rep, err := loop.Run(ctx, cfg, store, run)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	if rep.Outcome != loop.OutcomeComplete {
		return fmt.Errorf("the waiting loop stopped: %s: %s", rep.Outcome, rep.Message)
	}
	return nil
}

// Pickup completes the blockers of PickupPlan(n) one at a time, as
// PickupBy (ClaimBlockers must have claimed them), and returns each
// pickup: from just before the completion of "a-<i>" to the moment the
// waiting loop started "b-<i>", as started reports it. Before each
// completion it pauses 20–70 ms, at random, so that the waiting loop is
// waiting again and a store that looks for changes at intervals is
// caught at every phase of them. Pickups are sorted, shortest first.
func Pickup(ctx context.Context, store loop.TaskStore, n int, started <-chan Started) ([]time.Duration, error) {
	pickups := make([]time.Duration, 0, n)
	for i := range n {
		pause := 20*time.Millisecond + rand.N(50*time.Millisecond)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		a, b := fmt.Sprintf("a-%d", i), fmt.Sprintf("b-%d", i)
		task, err := store.Get(ctx, a)
		if err != nil {
			return nil, err
		}
		begin := time.Now()
		if err := store.Complete(ctx, loop.MoveParams{TaskID: a, Message: "done",
			By: loop.Actor{Agent: PickupBy, Loop: true, Generation: task.Generation}}); err != nil {
			return nil, fmt.Errorf("completing %s: %w", a, err)
		}
		select {
		case s, ok := <-started:
			if !ok {
				return nil, fmt.Errorf("the waiting loop ended before it started %s", b)
			}
			if s.TaskID != b {
				return nil, fmt.Errorf("the waiting loop started %s; want %s", s.TaskID, b)
			}
			pickups = append(pickups, s.At.Sub(begin))
		case <-time.After(10 * time.Second):
			return nil, fmt.Errorf("%s was not started within 10s of %s's completion", b, a)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	slices.Sort(pickups)
	return pickups, nil
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of sorted
// durations, by the nearest rank.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// ReportPickup reports sorted pickups as the benchmark's metrics:
// p50-ms, p95-ms, p99-ms and max-ms.
func ReportPickup(b *testing.B, sorted []time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(Percentile(sorted, 50)), "p50-ms")
	b.ReportMetric(ms(Percentile(sorted, 95)), "p95-ms")
	b.ReportMetric(ms(Percentile(sorted, 99)), "p99-ms")
	b.ReportMetric(ms(sorted[len(sorted)-1]), "max-ms")
	b.ReportMetric(0, "ns/op") // the time of a whole measurement says nothing
}

// WriteStarted returns, for a WaitingLoop in another process than
// Pickup, a started func that writes each start to w as a line
// "started <id> <Unix nanoseconds>", at once.
func WriteStarted(w io.Writer) func(Started) {
	var mu sync.Mutex
	return func(s Started) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "started %s %d\n", s.TaskID, s.At.UnixNano())
	}
}

// ReadStarted reads WriteStarted's lines from r and sends each on the
// channel it returns, which is closed at the end of r; other lines are
// passed over.
func ReadStarted(r io.Reader) <-chan Started {
	ch := make(chan Started)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "started" {
				continue
			}
			ns, err := strconv.ParseInt(f[2], 10, 64)
			if err == nil {
				ch <- Started{TaskID: f[1], At: time.Unix(0, ns)}
			}
		}
	}()
	return ch
}

// MeasurePickup measures n pickups on store, which holds PickupPlan(n)
// and nothing else: it claims the blockers (ClaimBlockers), starts the
// waiting loop — in this process on store when waiter is nil, else
// waiter, another process that runs WaiterMain on the same plan — and
// returns Pickup's figures.
func MeasurePickup(ctx context.Context, store loop.TaskStore, n int, waiter *exec.Cmd) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := ClaimBlockers(ctx, store, n); err != nil {
		return nil, err
	}
	if waiter != nil {
		out, err := waiter.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := waiter.Start(); err != nil {
			return nil, err
		}
		defer func() { waiter.Process.Kill(); waiter.Wait() }()
		return Pickup(ctx, store, n, ReadStarted(out))
	}
	dir, err := os.MkdirTemp("", "pickup")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// The waiting loop's end closes started, so that Pickup stops at
	// once, and its error is told with Pickup's.
	started := make(chan Started)
	var loopErr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer close(started)
		loopErr = WaitingLoop(ctx, store, dir, "agent-waiting1", func(s Started) {
			select {
			case started <- s:
			case <-ctx.Done():
			}
		})
	}()
	pickups, err := Pickup(ctx, store, n, started)
	cancel()
	<-finished
	if err != nil && loopErr != nil {
		err = fmt.Errorf("%w (the waiting loop: %v)", err, loopErr)
	}
	return pickups, err
}

// WaiterMain is the waiting loop of MeasurePickup in another process,
// on store: it writes each start to stdout.
func WaiterMain(store loop.TaskStore) error {
	dir, err := os.MkdirTemp("", "pickup")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out := bufio.NewWriter(os.Stdout)
	write := WriteStarted(out)
	return WaitingLoop(context.Background(), store, dir, "agent-waiting1", func(s Started) {
		write(s)
		out.Flush()
	})
}
