package dag

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

// helperEnv names the database a re-executed test binary claims from; see
// TestMain.
const helperEnv = "DAG_TEST_CLAIMER_DB"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		if err := claimerMain(path, os.Getenv("DAG_TEST_CLAIMER_AGENT")); err != nil {
			fmt.Fprintln(os.Stderr, "claimer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if path := os.Getenv(pickupEnv); path != "" {
		if err := pickupWaiter(path); err != nil {
			fmt.Fprintln(os.Stderr, "pickup waiter:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if templateDir != "" {
		os.RemoveAll(templateDir)
	}
	os.Exit(code)
}

// claimerMain runs claimer; DAG_TEST_CLAIMER_CPUPROFILE=<prefix> writes its
// CPU profile to <prefix>.<agent>, to see where the time of a
// multi-process run goes.
func claimerMain(path, agent string) error {
	if prefix := os.Getenv("DAG_TEST_CLAIMER_CPUPROFILE"); prefix != "" {
		f, err := os.Create(prefix + "." + agent)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	return claimer(path, agent)
}

// claimer is one agent process: it claims and completes tasks until none
// is open, printing "claimed <id>" for each, then "span <first> <last>" in
// Unix nanoseconds (the first claim started, the last completion ended).
func claimer(path, agent string) error {
	ctx := context.Background()
	s, err := OpenExisting(ctx, path, Options{BusyTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var first, last int64
	for {
		start := time.Now().UnixNano()
		task, err := s.Claim(ctx, loop.ClaimParams{Agent: agent, Holder: loop.ThisProcess(), Mode: loop.ClaimLoop})
		if errors.Is(err, loop.ErrNoReadyTask) {
			c, err := s.Counts(ctx, loop.Scope{})
			if err != nil {
				return err
			}
			if c.Open() == 0 {
				break
			}
			// Others hold the blockers of what is left.
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			return err
		}
		if first == 0 {
			first = start
		}
		if err := s.Complete(ctx, loop.MoveParams{TaskID: task.ID, Message: "done by " + agent, By: byLoop(task)}); err != nil {
			return err
		}
		last = time.Now().UnixNano()
		fmt.Fprintln(out, "claimed", task.ID)
	}
	fmt.Fprintln(out, "span", first, last)
	return nil
}

// fixture returns n tasks with random priorities, 30% of them blocked by
// an earlier task and 10% children of an earlier top-level task, from a
// fixed seed.
func fixture(n int) []ImportTask {
	r := rand.New(rand.NewPCG(1, 2))
	tasks := make([]ImportTask, n)
	var tops []int
	for i := range tasks {
		p := ImportTask{Line: i + 1, ID: "t-" + strconv.Itoa(i+1), Title: "task " + strconv.Itoa(i+1), Priority: r.IntN(5)}
		switch x := r.IntN(10); {
		case x < 3 && i > 0:
			p.BlockedBy = []string{tasks[r.IntN(i)].ID}
		case x == 3 && len(tops) > 0:
			p.ParentID = tasks[tops[r.IntN(len(tops))]].ID
		}
		if p.ParentID == "" && len(p.BlockedBy) == 0 {
			tops = append(tops, i)
		}
		tasks[i] = p
	}
	return tasks
}

// claimProcesses spawns procs copies of the test binary claiming from one
// database of n tasks at once, checks that every leaf task was claimed
// exactly once, and returns the claims per second of the busiest span.
func claimProcesses(t testing.TB, procs, n int) float64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "progress.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Import(t.Context(), fixture(n)); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(t.Context(), ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	parents := map[string]bool{}
	for _, task := range all {
		parents[task.ParentID] = true
	}
	var leaves []string
	for _, task := range all {
		if !parents[task.ID] {
			leaves = append(leaves, task.ID)
		}
	}

	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	errs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+path, fmt.Sprintf("DAG_TEST_CLAIMER_AGENT=agent-%d", i))
		outs[i], errs[i] = &bytes.Buffer{}, &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], errs[i]
		cmds[i] = cmd
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	claimed := map[string]int{}
	var first, last int64
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("claimer %d: %v: %s", i, err, errs[i])
		}
		for line := range strings.Lines(outs[i].String()) {
			f := strings.Fields(line)
			switch {
			case len(f) == 2 && f[0] == "claimed":
				claimed[f[1]]++
			case len(f) == 3 && f[0] == "span":
				a, _ := strconv.ParseInt(f[1], 10, 64)
				b, _ := strconv.ParseInt(f[2], 10, 64)
				if a != 0 && (first == 0 || a < first) {
					first = a
				}
				last = max(last, b)
			}
		}
	}
	var twice []string
	for id, k := range claimed {
		if k > 1 {
			twice = append(twice, id)
		}
	}
	sort.Strings(twice)
	if len(twice) > 0 {
		t.Errorf("claimed more than once: %v", twice)
	}
	var got []string
	for id := range claimed {
		got = append(got, id)
	}
	sort.Strings(got)
	sort.Strings(leaves)
	if diff := cmp.Diff(leaves, got); diff != "" {
		t.Errorf("claimed tasks (-every leaf +claimed):\n%s", diff)
	}
	c, err := s.Counts(t.Context(), loop.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(loop.Counts{Done: n}, c); diff != "" {
		t.Errorf("counts after the run (-want +got):\n%s", diff)
	}
	checkCounts(t, s)
	if last <= first {
		return 0
	}
	return float64(len(leaves)) / (float64(last-first) / 1e9)
}

// TestMultiProcessClaims runs 8 processes claiming and completing from one
// database file at once. DAG_CLAIM_TASKS sets the number of tasks (default
// 800) for a throughput measurement; the claims/s figure is logged.
func TestMultiProcessClaims(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns 8 processes; skipped with -short")
	}
	n := 800
	if v := os.Getenv("DAG_CLAIM_TASKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("DAG_CLAIM_TASKS=%q: %v", v, err)
		}
	}
	rate := claimProcesses(t, 8, n)
	t.Logf("8 processes, %d tasks: %.0f claims/s aggregate (claim+complete each)", n, rate)
}
