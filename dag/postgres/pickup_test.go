package postgres_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

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
// (looptest.MeasurePickup). Run it with -benchtime 1x.
func BenchmarkPickup(b *testing.B) {
	url := pgtest.URL(b)
	for _, where := range []string{"same-process", "other-process"} {
		b.Run(where, func(b *testing.B) {
			for b.Loop() {
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
				if where == "other-process" {
					waiter = exec.Command(os.Args[0], "-test.run=^$")
					waiter.Env = append(os.Environ(), pickupURLEnv+"="+url, pickupPlanEnv+"="+plan)
					waiter.Stderr = os.Stderr
				}
				pickups, err := looptest.MeasurePickup(b.Context(), s, pickupSamples, waiter)
				if err != nil {
					b.Fatal(err)
				}
				looptest.ReportPickup(b, pickups)
			}
		})
	}
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
