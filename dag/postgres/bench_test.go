package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
)

var benchPlans atomic.Int64

// claimProcesses makes a plan of n tasks (fixture) in the database at
// url, has procs re-executed test binaries claim and complete it at once,
// checks that every leaf was claimed exactly once (by the processes' word
// and by the tasks' histories), that the counts say every task is done
// and that the plan's counters are right, and returns
// the claims per second from the first claim to the last completion.
func claimProcesses(b *testing.B, url string, procs, n int) float64 {
	b.Helper()
	ctx := context.Background()
	plan := fmt.Sprintf("bench-%d", benchPlans.Add(1))
	tasks, leaves := fixture(n)
	seed := openNamed(b, url, plan, dag.ServerOptions{})
	if _, err := seed.Import(ctx, tasks); err != nil {
		b.Fatal(err)
	}
	claimed := map[string]int{}
	var first, last int64
	for _, out := range runClaimers(b, ctx, url, plan, procs) {
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			switch {
			case len(f) == 2 && f[0] == "claimed":
				claimed[f[1]]++
			case len(f) == 3 && f[0] == "span":
				a, _ := strconv.ParseInt(f[1], 10, 64)
				z, _ := strconv.ParseInt(f[2], 10, 64)
				if a != 0 && (first == 0 || a < first) {
					first = a
				}
				last = max(last, z)
			}
		}
	}
	checkClaimed(b, claimed, leaves)
	if c, err := seed.Counts(ctx, loop.Scope{}); err != nil || c != (loop.Counts{Done: n}) {
		b.Errorf("counts after the run = %+v, %v; want all %d done", c, err, n)
	}
	checkHistories(b, seed, tasks, leaves)
	checkPlan(b, url, plan)
	if last <= first {
		return 0
	}
	return float64(len(leaves)) / (float64(last-first) / 1e9)
}

// BenchmarkClaimProcesses reports the aggregate claims/s of 8 processes
// (and, for comparison, of one) claiming and completing from one
// 10,000-task plan on the server at once, each claim followed by its
// completion: two transactions. Every leaf must be claimed exactly once.
// Run it with -benchtime=1x: each round makes a plan and spawns the
// processes (ns/op counts both; claims/s only the processes' work, from
// the first claim to the last completion). scripts/bench-postgres.sh
// sets it beside pgbench's rate on the same server.
// RALPH_PGBENCH_TASKS sets the number of tasks.
func BenchmarkClaimProcesses(b *testing.B) {
	url := pgtest.URL(b)
	n := 10_000
	if v := os.Getenv("RALPH_PGBENCH_TASKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("RALPH_PGBENCH_TASKS=%q: %v", v, err)
		}
	}
	for _, procs := range []int{1, 8} {
		b.Run(strconv.Itoa(procs), func(b *testing.B) {
			var rate float64
			for b.Loop() {
				rate = claimProcesses(b, url, procs, n)
			}
			b.ReportMetric(rate, "claims/s")
		})
	}
}
