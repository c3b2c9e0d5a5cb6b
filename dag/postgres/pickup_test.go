package postgres_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// The environment of a re-executed test binary that runs the waiting loop
// of BenchmarkPickup/other-process; see TestMain.
const (
	pickupURLEnv  = "RALPH_PGTEST_PICKUP_URL"
	pickupPlanEnv = "RALPH_PGTEST_PICKUP_PLAN"
)

// pickupSamples is how many pickups a BenchmarkPickup measurement takes.
const pickupSamples = 200

// BenchmarkPickup is dag's BenchmarkPickup on a plan on PostgreSQL: how
// long a loop waiting for other agents takes to start a task once its
// last blocker is done, the waiting loop in this process or another
// (looptest.MeasurePickup), on the server directly (waits hear its
// notifications) and through PgBouncer in transaction pooling (waits ask
// every pollEvery). Run it with -benchtime 1x.
func BenchmarkPickup(b *testing.B) {
	direct := pgtest.URL(b)
	pooled, _ := pgtest.Pooled(b)
	for _, server := range []struct{ name, url string }{{"direct", direct}, {"pgbouncer", pooled}} {
		for _, where := range []string{"same-process", "other-process"} {
			b.Run(server.name+"/"+where, func(b *testing.B) {
				for b.Loop() {
					looptest.ReportPickup(b, measurePickup(b, server.url, where == "other-process"))
				}
			})
		}
	}
}

func measurePickup(b *testing.B, url string, otherProcess bool) []time.Duration {
	b.Helper()
	plan := fmt.Sprintf("pickup-%d", benchPlans.Add(1))
	s := openNamed(b, url, plan, dag.ServerOptions{})
	var tasks []dag.ImportTask
	for _, sd := range looptest.PickupPlan(pickupSamples) {
		tasks = append(tasks, dag.ImportTask{ID: sd.ID, Title: sd.Title, Priority: sd.Priority, BlockedBy: sd.BlockedBy})
	}
	if _, err := s.Import(b.Context(), tasks); err != nil {
		b.Fatal(err)
	}
	var waiter *exec.Cmd
	if otherProcess {
		waiter = exec.Command(os.Args[0], "-test.run=^$")
		waiter.Env = append(os.Environ(), pickupURLEnv+"="+url, pickupPlanEnv+"="+plan)
		waiter.Stderr = os.Stderr
	}
	pickups, err := looptest.MeasurePickup(b.Context(), s, pickupSamples, waiter)
	if err != nil {
		b.Fatal(err)
	}
	return pickups
}

// pickupWaiter is the waiting loop of BenchmarkPickup/other-process.
func pickupWaiter(url, plan string) error {
	s, err := postgres.Open(context.Background(), postgres.Config{URL: url, Plan: plan})
	if err != nil {
		return err
	}
	defer s.Close()
	return looptest.WaiterMain(s)
}
