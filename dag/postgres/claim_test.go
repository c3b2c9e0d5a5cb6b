package postgres_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/loop"
)

// The environment of a re-executed test binary that claims from a plan;
// see TestMain.
const (
	claimerURLEnv   = "RALPH_PGTEST_CLAIMER_URL"
	claimerPlanEnv  = "RALPH_PGTEST_CLAIMER_PLAN"
	claimerAgentEnv = "RALPH_PGTEST_CLAIMER_AGENT"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(claimerURLEnv); url != "" {
		if err := claimerMain(url, os.Getenv(claimerPlanEnv), os.Getenv(claimerAgentEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "claimer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if url := os.Getenv(pickupURLEnv); url != "" {
		if err := pickupWaiter(url, os.Getenv(pickupPlanEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "pickup waiter:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// claimerMain is one agent process: it claims and completes tasks of the
// plan until none is open, printing "claimed <id>" for each, then "span
// <first> <last>" in Unix nanoseconds, from the start of its first claim
// to the end of its last completion (for BenchmarkClaimProcesses).
// RALPH_PGTEST_CLAIMER_CPUPROFILE=<prefix> writes its CPU profile to
// <prefix>.<agent>, to see where a run's time goes.
func claimerMain(url, plan, agent string) error {
	if prefix := os.Getenv("RALPH_PGTEST_CLAIMER_CPUPROFILE"); prefix != "" {
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
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Config{URL: url, Plan: plan,
		Options: dag.ServerOptions{Options: dag.Options{BusyTimeout: time.Minute}}})
	if err != nil {
		return err
	}
	defer s.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	start := time.Now().UnixNano()
	var first, last int64
	err = claimAll(ctx, s, agent, func(id string) {
		if first == 0 {
			first = start
		}
		last = time.Now().UnixNano()
		fmt.Fprintln(out, "claimed", id)
	})
	fmt.Fprintln(out, "span", first, last)
	return err
}

// claimAll claims and completes tasks until none is open, calling
// claimed with each task it completed.
func claimAll(ctx context.Context, s *dag.Store, agent string, claimed func(id string)) error {
	for {
		task, err := s.Claim(ctx, loop.ClaimParams{Agent: agent, Holder: loop.ThisProcess(), Mode: loop.ClaimLoop})
		if errors.Is(err, loop.ErrNoReadyTask) {
			c, err := s.Counts(ctx, loop.Scope{})
			if err != nil {
				return err
			}
			if c.Open() == 0 {
				return nil
			}
			// Others hold the blockers of what is left.
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if err := s.Complete(ctx, loop.MoveParams{TaskID: task.ID, Message: "done by " + agent,
			By: loop.Actor{Agent: agent, Loop: true, Generation: task.Generation}}); err != nil {
			return fmt.Errorf("complete %s: %w", task.ID, err)
		}
		claimed(task.ID)
	}
}

// fixture returns n tasks with random priorities, 30% of them blocked by
// an earlier task and 10% children of an earlier top-level task, from a
// fixed seed (as package dag's tests make them), and the ids of its
// leaves: the tasks that are claimed (a parent is done by its children).
func fixture(n int) (tasks []dag.ImportTask, leaves []string) {
	r := rand.New(rand.NewPCG(1, 2))
	tasks = make([]dag.ImportTask, n)
	var tops []int
	parents := map[string]bool{}
	for i := range tasks {
		p := dag.ImportTask{Line: i + 1, ID: "t-" + strconv.Itoa(i+1), Title: "task " + strconv.Itoa(i+1), Priority: r.IntN(5)}
		switch x := r.IntN(10); {
		case x < 3 && i > 0:
			p.BlockedBy = []string{tasks[r.IntN(i)].ID}
		case x == 3 && len(tops) > 0:
			p.ParentID = tasks[tops[r.IntN(len(tops))]].ID
			parents[p.ParentID] = true
		}
		if p.ParentID == "" && len(p.BlockedBy) == 0 {
			tops = append(tops, i)
		}
		tasks[i] = p
	}
	for _, task := range tasks {
		if !parents[task.ID] {
			leaves = append(leaves, task.ID)
		}
	}
	sort.Strings(leaves)
	return tasks, leaves
}

// openNamed opens (making it if need be) plan on the database at url,
// closed when the test ends.
func openNamed(t testing.TB, url, plan string, opts dag.ServerOptions) *dag.Store {
	t.Helper()
	if opts.RetryFor == 0 {
		opts.RetryFor = testRetry
	}
	s, err := postgres.Open(t.Context(), postgres.Config{URL: url, Plan: plan, Create: true, Options: opts})
	if err != nil {
		t.Fatalf("Open(%s): %v", plan, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// planURL returns the URL of the database at url with the schema of plan
// as the search path: a connection that sees the plan's tables.
func planURL(t testing.TB, url, plan string) string {
	t.Helper()
	plans, err := postgres.Plans(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		if p.Name == plan {
			sep := "?"
			if strings.Contains(url, "?") {
				sep = "&"
			}
			return url + sep + "search_path=ralph_plan_" + strconv.Itoa(p.ID)
		}
	}
	t.Fatalf("no plan %s", plan)
	return ""
}

// checkPlan checks the counters the writes keep in the plan's tables
// against values recomputed from the rows, as package dag's checkCounts
// does for a SQLite file, and that the dependencies form no cycle.
func checkPlan(t testing.TB, url, plan string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, planURL(t, url, plan))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	read := func(q string) map[string]int {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var feature, status string
			var n int
			if err := rows.Scan(&feature, &status, &n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				m[feature+"/"+status] = n
			}
		}
		return m
	}
	want := read(`SELECT coalesce(feature, ''), CASE status WHEN 'in_progress' THEN 'pending' ELSE status END, count(*)
		FROM tasks GROUP BY 1, 2`)
	got := read(`SELECT feature, status, sum(n) FROM status_counts GROUP BY feature, status`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status_counts out of step with tasks (-tasks +status_counts):\n%s", diff)
	}
	rows, err := conn.Query(ctx, `SELECT id, blocker_count, dependent_count, unmet_blockers, child_count, parent_failed,
		(SELECT count(*) FROM deps WHERE blocked_id = t.id),
		(SELECT count(*) FROM deps WHERE blocker_id = t.id),
		(SELECT count(*) FROM deps d JOIN tasks b ON b.id = d.blocker_id WHERE d.blocked_id = t.id AND b.status <> 'done'),
		(SELECT count(*) FROM tasks c WHERE c.parent_id = t.id),
		(SELECT count(*) FROM tasks p WHERE p.id = t.parent_id AND p.status = 'failed')
		FROM tasks t ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var kept, fresh [5]int
		if err := rows.Scan(&id, &kept[0], &kept[1], &kept[2], &kept[3], &kept[4],
			&fresh[0], &fresh[1], &fresh[2], &fresh[3], &fresh[4]); err != nil {
			t.Fatal(err)
		}
		if kept != fresh {
			t.Errorf("task %s: counters (blockers, dependents, unmet, children, parent failed) kept %v, recomputed %v", id, kept, fresh)
		}
	}
	rows.Close()
	var cyclic int
	if err := conn.QueryRow(ctx, `WITH RECURSIVE w(start, id) AS (
			SELECT blocked_id, blocker_id FROM deps
			UNION
			SELECT w.start, d.blocker_id FROM deps d JOIN w ON d.blocked_id = w.id
		) SELECT count(*) FROM w WHERE start = id`).Scan(&cyclic); err != nil {
		t.Fatal(err)
	}
	if cyclic > 0 {
		t.Errorf("%d tasks wait for themselves through their dependencies", cyclic)
	}
}

// TestOppositeDependencies: two stores (two machines) add a→b and b→a at
// the same moment, round after round: each time exactly one wins and the
// other is refused with ErrCycle, and the graph has no cycle after.
func TestOppositeDependencies(t *testing.T) {
	forEachServer(t, func(t *testing.T, url, direct string) {
		ctx := t.Context()
		a := openNamed(t, url, "deps", dag.ServerOptions{})
		b := openNamed(t, url, "deps", dag.ServerOptions{})
		const rounds = 50
		wins := [2]int{}
		for round := range rounds {
			x, y := fmt.Sprintf("x%d", round), fmt.Sprintf("y%d", round)
			for _, id := range []string{x, y} {
				if _, err := a.Add(ctx, dag.AddParams{ID: id, Title: id}); err != nil {
					t.Fatal(err)
				}
			}
			// Warm both stores' connections, so that neither starts late.
			for _, s := range []*dag.Store{a, b} {
				if _, err := s.Get(ctx, x); err != nil {
					t.Fatal(err)
				}
			}
			start := make(chan struct{})
			var errs [2]error
			var wg sync.WaitGroup
			wg.Go(func() { <-start; errs[0] = a.AddDependency(ctx, x, y) })
			wg.Go(func() { <-start; errs[1] = b.AddDependency(ctx, y, x) })
			close(start)
			wg.Wait()
			switch {
			case errs[0] == nil && errors.Is(errs[1], dag.ErrCycle):
				wins[0]++
			case errs[1] == nil && errors.Is(errs[0], dag.ErrCycle):
				wins[1]++
			default:
				t.Fatalf("round %d: %s→%s: %v; %s→%s: %v; want one success and one ErrCycle", round, x, y, errs[0], y, x, errs[1])
			}
			tx, _ := a.Get(ctx, x)
			ty, _ := a.Get(ctx, y)
			if n := len(tx.BlockedBy) + len(ty.BlockedBy); n != 1 {
				t.Fatalf("round %d: %s waits for %v, %s for %v; want one dependency", round, x, tx.BlockedBy, y, ty.BlockedBy)
			}
		}
		t.Logf("wins: store a %d, store b %d", wins[0], wins[1])
		if ready, err := a.Ready(ctx, loop.Scope{}, 0); err != nil || len(ready) != rounds {
			t.Errorf("%d ready tasks (%v), want one of each pair, %d", len(ready), err, rounds)
		}
		checkPlan(t, direct, "deps")
	})
}

// checkHistories checks each task's history: a leaf has exactly one claim
// and one completion, by the same agent; a parent is done by ralph when
// its children are, and never claimed.
func checkHistories(t testing.TB, s *dag.Store, tasks []dag.ImportTask, leaves []string) {
	t.Helper()
	leaf := map[string]bool{}
	for _, id := range leaves {
		leaf[id] = true
	}
	for _, task := range tasks {
		logs, err := s.Logs(context.Background(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range logs {
			kinds = append(kinds, e.Kind)
		}
		kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == loop.LogUnblock })
		want := []string{loop.LogDone}
		if leaf[task.ID] {
			want = []string{loop.LogClaim, loop.LogDone}
		}
		if diff := cmp.Diff(want, kinds); diff != "" {
			t.Errorf("history of %s (-want +got):\n%s", task.ID, diff)
			continue
		}
		if leaf[task.ID] && logs[0].Actor != logs[1].Actor {
			t.Errorf("%s claimed by %s, completed by %s", task.ID, logs[0].Actor, logs[1].Actor)
		}
	}
}

// checkClaimed checks that every leaf was claimed exactly once.
func checkClaimed(t testing.TB, claimed map[string]int, leaves []string) {
	t.Helper()
	var twice, got []string
	for id, k := range claimed {
		got = append(got, id)
		if k > 1 {
			twice = append(twice, id)
		}
	}
	sort.Strings(twice)
	sort.Strings(got)
	if len(twice) > 0 {
		t.Errorf("claimed more than once: %v", twice)
	}
	if diff := cmp.Diff(leaves, got); diff != "" {
		t.Errorf("claimed tasks (-every leaf +claimed):\n%s", diff)
	}
}

// TestConcurrentClaims: 8 stores (8 machines), two claiming goroutines
// each, claim and complete a plan of 200 tasks with dependencies and
// parents: every leaf is claimed exactly once, none is missed, and the
// counts and histories say so.
func TestConcurrentClaims(t *testing.T) {
	forEachServer(t, func(t *testing.T, url, direct string) {
		ctx := t.Context()
		tasks, leaves := fixture(200)
		seed := openNamed(t, url, "claims", dag.ServerOptions{})
		if _, err := seed.Import(ctx, tasks); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		claimed := map[string]int{}
		var wg sync.WaitGroup
		for i := range 8 {
			s := openNamed(t, url, "claims", dag.ServerOptions{Options: dag.Options{BusyTimeout: time.Minute}})
			for j := range 2 {
				agent := fmt.Sprintf("agent-%d-%d", i, j)
				wg.Go(func() {
					err := claimAll(ctx, s, agent, func(id string) {
						mu.Lock()
						claimed[id]++
						mu.Unlock()
					})
					if err != nil {
						t.Errorf("%s: %v", agent, err)
					}
				})
			}
		}
		wg.Wait()
		checkClaimed(t, claimed, leaves)
		if c, err := seed.Counts(ctx, loop.Scope{}); err != nil || c != (loop.Counts{Done: len(tasks)}) {
			t.Errorf("counts after the run = %+v, %v; want all %d done", c, err, len(tasks))
		}
		checkHistories(t, seed, tasks, leaves)
		checkPlan(t, direct, "claims")
	})
}

// TestMultiProcessClaims: processes (re-executed test binaries) claim and
// complete one plan on the server at once: every leaf is claimed exactly
// once.
func TestMultiProcessClaims(t *testing.T) {
	forEachServer(t, func(t *testing.T, url, direct string) {
		if testing.Short() {
			t.Skip("spawns processes; skipped with -short")
		}
		ctx := t.Context()
		tasks, leaves := fixture(300)
		seed := openNamed(t, url, "procs", dag.ServerOptions{})
		if _, err := seed.Import(ctx, tasks); err != nil {
			t.Fatal(err)
		}
		const procs = 6
		claimed := map[string]int{}
		busy := 0
		for _, out := range runClaimers(t, ctx, url, "procs", procs) {
			n := 0
			for line := range strings.Lines(out) {
				if id, ok := strings.CutPrefix(strings.TrimSpace(line), "claimed "); ok {
					claimed[id]++
					n++
				}
			}
			if n > 0 {
				busy++
			}
		}
		t.Logf("%d of %d processes claimed tasks", busy, procs)
		checkClaimed(t, claimed, leaves)
		if c, err := seed.Counts(ctx, loop.Scope{}); err != nil || c != (loop.Counts{Done: len(tasks)}) {
			t.Errorf("counts after the run = %+v, %v; want all %d done", c, err, len(tasks))
		}
		checkHistories(t, seed, tasks, leaves)
		checkPlan(t, direct, "procs")
	})
}

// runClaimers runs procs re-executed test binaries that claim and
// complete the tasks of plan at url (claimerMain) at once, and returns
// what each printed; a claimer that failed fails tb.
func runClaimers(tb testing.TB, ctx context.Context, url, plan string, procs int) []string {
	tb.Helper()
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	errs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), claimerURLEnv+"="+url, claimerPlanEnv+"="+plan,
			fmt.Sprintf("%s=agent-%d", claimerAgentEnv, i))
		outs[i], errs[i] = &bytes.Buffer{}, &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], errs[i]
		cmds[i] = cmd
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
	}
	printed := make([]string, procs)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			tb.Errorf("claimer %d: %v: %s", i, err, errs[i])
		}
		printed[i] = outs[i].String()
	}
	return printed
}

// TestCompletionsAtOnce: the completions of claims run beside each other
// on a server (dag.Store.Complete): two children completed at once still
// make their parent done, two blockers completed at once still make
// their dependent ready, and a completion that finds a claim whose lease
// expired recovers it (under the plan's whole lock). Each round starts
// both completions together, on two stores (two connections).
func TestCompletionsAtOnce(t *testing.T) {
	forEachServer(t, func(t *testing.T, url, direct string) {
		ctx := t.Context()
		a := openNamed(t, url, "atonce", dag.ServerOptions{})
		b := openNamed(t, url, "atonce", dag.ServerOptions{})
		const rounds = 20
		var batch []dag.ImportTask
		for r := range rounds {
			p, d := fmt.Sprintf("p%d", r), fmt.Sprintf("d%d", r)
			batch = append(batch,
				dag.ImportTask{Line: len(batch) + 1, ID: p, Title: p},
				dag.ImportTask{Line: len(batch) + 2, ID: p + "-a", Title: "child a", ParentID: p},
				dag.ImportTask{Line: len(batch) + 3, ID: p + "-b", Title: "child b", ParentID: p},
				dag.ImportTask{Line: len(batch) + 4, ID: d + "-x", Title: "blocker x"},
				dag.ImportTask{Line: len(batch) + 5, ID: d + "-y", Title: "blocker y"},
				dag.ImportTask{Line: len(batch) + 6, ID: d, Title: "dependent", Status: loop.StatusBlocked,
					BlockedBy: []string{d + "-x", d + "-y"}})
		}
		if _, err := a.Import(ctx, batch); err != nil {
			t.Fatal(err)
		}
		both := func(s1, s2 *dag.Store, id1, id2 string) {
			t.Helper()
			pair := []struct {
				s  *dag.Store
				id string
			}{{s1, id1}, {s2, id2}}
			var gens [2]int64
			for i, c := range pair {
				task, err := c.s.Claim(ctx, loop.ClaimParams{TaskID: c.id, Agent: "ag-" + c.id, Mode: loop.ClaimLoop})
				if err != nil {
					t.Fatal(err)
				}
				gens[i] = task.Generation
			}
			start := make(chan struct{})
			errs := make(chan error, 2)
			for i, c := range pair {
				go func() {
					<-start
					errs <- c.s.Complete(ctx, loop.MoveParams{TaskID: c.id, Message: "done",
						By: loop.Actor{Agent: "ag-" + c.id, Loop: true, Generation: gens[i]}})
				}()
			}
			close(start)
			for range 2 {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
		}
		for r := range rounds {
			p, d := fmt.Sprintf("p%d", r), fmt.Sprintf("d%d", r)
			both(a, b, p+"-a", p+"-b")
			both(a, b, d+"-x", d+"-y")
			for id, want := range map[string]loop.Status{p: loop.StatusDone, d: loop.StatusPending} {
				if task, err := a.Get(ctx, id); err != nil || task.Status != want {
					t.Errorf("round %d: %s is %s (%v) after both its %s completed at once; want %s",
						r, id, task.Status, err, map[bool]string{true: "children", false: "blockers"}[id == p], want)
				}
			}
		}

		// A lease expired: the completion beside others runs again with
		// the whole lock, and recovers it first.
		if _, err := a.Import(ctx, []dag.ImportTask{{Line: 1, ID: "late", Title: "late"}, {Line: 2, ID: "mine", Title: "mine"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Claim(ctx, loop.ClaimParams{TaskID: "late", Agent: "ag-late", Lease: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		mine, err := a.Claim(ctx, loop.ClaimParams{TaskID: "mine", Agent: "ag-mine", Mode: loop.ClaimLoop})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		if err := a.Complete(ctx, loop.MoveParams{TaskID: "mine", Message: "done",
			By: loop.Actor{Agent: "ag-mine", Loop: true, Generation: mine.Generation}}); err != nil {
			t.Fatal(err)
		}
		// Read where reads recover nothing.
		ro := openNamed(t, url, "atonce", dag.ServerOptions{Options: dag.Options{ReadOnly: true}})
		for id, want := range map[string]loop.Status{"mine": loop.StatusDone, "late": loop.StatusPending} {
			if task, err := ro.Get(ctx, id); err != nil || task.Status != want {
				t.Errorf("%s is %s (%v); want %s", id, task.Status, err, want)
			}
		}
		checkPlan(t, direct, "atonce")
	})
}
