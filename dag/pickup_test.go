package dag

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop/looptest"
)

// pickupEnv names the database a re-executed test binary runs a waiting
// loop on (see TestMain and pickupWaiter).
const pickupEnv = "DAG_TEST_PICKUP_DB"

// pickupSamples is how many pickups a BenchmarkPickup measurement takes.
const pickupSamples = 200

// BenchmarkPickup measures how long a loop waiting for other agents takes
// to start a task once its last blocker is done (DESIGN §17, issue 25;
// looptest.MeasurePickup) on a SQLite file, the waiting loop in this
// process (as the workers of one build) and in another (another build on
// the same plan). One measurement is pickupSamples pickups, reported as
// percentiles: run it with -benchtime 1x.
func BenchmarkPickup(b *testing.B) {
	for _, where := range []string{"same-process", "other-process"} {
		b.Run(where, func(b *testing.B) {
			for b.Loop() {
				looptest.ReportPickup(b, measurePickup(b, where == "other-process"))
			}
		})
	}
}

func measurePickup(b *testing.B, otherProcess bool) []time.Duration {
	b.Helper()
	path := filepath.Join(b.TempDir(), "progress.db")
	s, err := Open(b.Context(), path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Import(b.Context(), pickupImport(pickupSamples)); err != nil {
		b.Fatal(err)
	}
	var waiter *exec.Cmd
	if otherProcess {
		waiter = exec.Command(os.Args[0], "-test.run=^$")
		waiter.Env = append(os.Environ(), pickupEnv+"="+path)
		waiter.Stderr = os.Stderr
	}
	pickups, err := looptest.MeasurePickup(b.Context(), s, pickupSamples, waiter)
	if err != nil {
		b.Fatal(err)
	}
	return pickups
}

// pickupWaiter is the waiting loop of BenchmarkPickup/other-process, in a
// re-executed test binary, on the database at path.
func pickupWaiter(path string) error {
	s, err := OpenExisting(context.Background(), path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	return looptest.WaiterMain(s)
}

// pickupImport is looptest.PickupPlan(n) as an import.
func pickupImport(n int) []ImportTask {
	var tasks []ImportTask
	for _, sd := range looptest.PickupPlan(n) {
		tasks = append(tasks, ImportTask{ID: sd.ID, Title: sd.Title, Priority: sd.Priority, BlockedBy: sd.BlockedBy})
	}
	return tasks
}
