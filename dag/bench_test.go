package dag

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

var (
	templatesMu sync.Mutex
	templates   = map[int]string{} // size -> database file built once per run
	templateDir string
)

// benchStore returns a store over a fresh copy of a database holding
// fixture(n); the fixture is imported once per size and copied after that.
func benchStore(b *testing.B, n int) *Store {
	b.Helper()
	templatesMu.Lock()
	path, ok := templates[n]
	if !ok {
		if templateDir == "" {
			dir, err := os.MkdirTemp("", "dag-bench-")
			if err != nil {
				b.Fatal(err)
			}
			templateDir = dir
		}
		path = filepath.Join(templateDir, fmt.Sprintf("fixture-%d.db", n))
		s, err := Open(context.Background(), path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Import(context.Background(), fixture(n)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			b.Fatal(err)
		}
		s.Close()
		templates[n] = path
	}
	templatesMu.Unlock()
	dst := filepath.Join(b.TempDir(), "progress.db")
	copyFile(b, path, dst)
	s, err := OpenExisting(b.Context(), dst, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func copyFile(b *testing.B, src, dst string) {
	b.Helper()
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

var sizes = []int{10_000, 100_000}

func BenchmarkReady(b *testing.B) {
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := benchStore(b, n)
			for b.Loop() {
				ts, err := s.Ready(b.Context(), loop.Scope{}, 10)
				if err != nil || len(ts) != 10 {
					b.Fatalf("Ready: %d tasks, %v", len(ts), err)
				}
			}
		})
	}
}

func BenchmarkClaimComplete(b *testing.B) {
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := benchStore(b, n)
			for b.Loop() {
				task, err := s.Claim(b.Context(), loop.ClaimParams{Agent: "agent-bench", Holder: loop.ThisProcess(), Mode: loop.ClaimLoop})
				if errors.Is(err, loop.ErrNoReadyTask) {
					b.Fatalf("the %d-task fixture ran out of ready tasks; use a smaller -benchtime", n)
				}
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Complete(b.Context(), loop.MoveParams{TaskID: task.ID, Message: "ok", By: byLoop(task)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClaimCompleteHeld is BenchmarkClaimComplete/10000 with 7 other
// agents holding a claim each, as in a run of 8 agents: every write checks
// the leases of the claims in progress.
func BenchmarkClaimCompleteHeld(b *testing.B) {
	s := benchStore(b, 10_000)
	for i := range 7 {
		if _, err := s.Claim(b.Context(), loop.ClaimParams{Agent: "agent-" + strconv.Itoa(i), Lease: time.Hour, Holder: loop.ThisProcess(), Mode: loop.ClaimLoop}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		task, err := s.Claim(b.Context(), loop.ClaimParams{Agent: "agent-bench", Holder: loop.ThisProcess(), Mode: loop.ClaimLoop})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(b.Context(), loop.MoveParams{TaskID: task.ID, Message: "ok", By: byLoop(task)}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkImport(b *testing.B) {
	tasks := fixture(100_000)
	b.Run("100000", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			path := filepath.Join(b.TempDir(), "progress.db")
			s, err := Open(b.Context(), path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := s.Import(b.Context(), tasks); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			s.Close()
			b.StartTimer()
		}
	})
}

// BenchmarkImportJSONL imports a JSON Lines file of 100,000 tasks (the
// fixture's, parents moved after their children as plans often have them)
// through ImportFrom, as `ralph task import` does, and reports the peak of
// the heap in use during the import, sampled every 5 ms, whole and per
// task: the memory check of the streamed import (the script
// scripts/bench-bigplans.sh measures a million tasks' peak RSS).
func BenchmarkImportJSONL(b *testing.B) {
	const n = 100_000
	tasks := fixture(n)
	for i := range tasks {
		tasks[i].ParentID = ""
		if i%10 == 0 && i+1 < n {
			tasks[i].ParentID = tasks[i+1+(i*7)%(n-i-1)].ID
		}
		tasks[i].BlockedBy = slicesWithout(tasks[i].BlockedBy, "")
	}
	path := filepath.Join(b.TempDir(), "plan.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := WriteJSONL(f, tasks); err != nil {
		b.Fatal(err)
	}
	f.Close()
	tasks = nil
	b.Run(strconv.Itoa(n), func(b *testing.B) {
		var peak uint64
		for b.Loop() {
			b.StopTimer()
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "progress.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			in, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			src, err := NewJSONLSource(in)
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			stop := sampleHeap(&peak)
			b.StartTimer()
			if got, err := s.ImportFrom(b.Context(), ImportParams{Source: src}); err != nil || got != n {
				b.Fatalf("ImportFrom = %d, %v", got, err)
			}
			b.StopTimer()
			stop()
			in.Close()
			s.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		b.ReportMetric(float64(peak)/n, "peak-heap-B/task")
	})
}

// sampleHeap records in peak the largest heap in use it sees until stop.
func sampleHeap(peak *uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			*peak = max(*peak, m.HeapInuse)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// BenchmarkEachTask lists every task of the fixture plans, as `ralph task
// list` does without its formatting; with -benchmem, B/op is what a whole
// listing allocates (all of it garbage as it goes).
func BenchmarkEachTask(b *testing.B) {
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := benchStore(b, n)
			for b.Loop() {
				got := 0
				if err := s.EachTask(b.Context(), ListParams{}, func(loop.Task) error { got++; return nil }); err != nil || got != n {
					b.Fatalf("EachTask: %d tasks, %v", got, err)
				}
			}
		})
	}
}

// BenchmarkClaimProcesses reports the aggregate claims/s of 8 processes
// (and, for comparison, of one process) claiming and completing from one
// 10,000-task database at once (run it
// with -benchtime=1x: each round spawns the processes).
func BenchmarkClaimProcesses(b *testing.B) {
	for _, procs := range []int{1, 8} {
		b.Run(strconv.Itoa(procs), func(b *testing.B) {
			var rate float64
			for b.Loop() {
				rate = claimProcesses(b, procs, 10_000)
			}
			b.ReportMetric(rate, "claims/s")
		})
	}
}

func BenchmarkCounts(b *testing.B) {
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := benchStore(b, n)
			for b.Loop() {
				c, err := s.Counts(b.Context(), loop.Scope{})
				if err != nil || c.Total() != n {
					b.Fatalf("Counts: %+v, %v", c, err)
				}
			}
		})
	}
}

// BenchmarkPeek is what `ralph task peek -n 10` does in its process: open
// the database, recover expired claims, read the first 10 ready tasks and
// the active ones, close.
func BenchmarkPeek(b *testing.B) {
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			path := benchStore(b, n).Path()
			for b.Loop() {
				s, err := OpenExisting(b.Context(), path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Recover(b.Context()); err != nil {
					b.Fatal(err)
				}
				ready, err := s.Ready(b.Context(), loop.Scope{}, 10)
				if err != nil || len(ready) != 10 {
					b.Fatalf("Ready: %d, %v", len(ready), err)
				}
				if _, err := s.Active(b.Context(), loop.Scope{}); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
	}
}

// byLoop is the loop completing its own claim of task, as ralph build does.
func byLoop(task loop.Task) loop.Actor {
	return loop.Actor{Agent: task.ClaimedBy, Loop: true, Generation: task.Generation}
}

func slicesWithout(ss []string, x string) []string {
	var out []string
	for _, s := range ss {
		if s != x {
			out = append(out, s)
		}
	}
	return out
}
