package progress_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/dag/progress"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

var benchMB = flag.Int("progress-mb", 1, "size in MB of the progress file BenchmarkIteration runs over")

// BenchmarkIteration runs one build iteration (loop.Run with Once) over a
// progress file of -progress-mb megabytes: every store call the loop makes
// (Done, Counts, Claim, Get, Logs, Complete, …) and the Iteration Log row
// the CLI writes, with a stand-in agent that answers task-done at once;
// under "tick" it first ticks its box in the file itself, as progress-file
// agents do, so that the store finds the file changed. Under "tasks" the
// file is mostly boxes (about 700,000 in 50 MB, the worst case for the
// parser), under "log" mostly Iteration Log rows (a long-lived file, 400
// boxes). It reports the peak
// resident set of one iteration (peak-RSS-MB: VmHWM, reset before each
// iteration), the resident set before it (base-RSS-MB) and the file's size
// (file-MB).
//
//	go test ./dag/progress/ -run '^$' -bench '^BenchmarkIteration$' -benchtime 3x -args -progress-mb=50
func BenchmarkIteration(b *testing.B) {
	for _, shape := range []string{"tasks", "log"} {
		for _, tick := range []bool{false, true} {
			name := shape + "/sigil"
			if tick {
				name = shape + "/tick"
			}
			b.Run(name, func(b *testing.B) { benchmarkIteration(b, shape == "log", tick) })
		}
	}
}

func benchmarkIteration(b *testing.B, log, tick bool) {
	root := b.TempDir()
	path := filepath.Join(root, "progress.md")
	size, boxes := writeBigFile(b, path, *benchMB<<20, log)
	store, err := progress.Open(path, progress.Options{})
	if err != nil {
		b.Fatal(err)
	}
	next := 0 // the loop claims the unticked boxes in file order
	agent := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		if tick {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return loop.RunResult{}, err
			}
			_, err = f.WriteAt([]byte("x"), boxes[next])
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return loop.RunResult{}, err
			}
		}
		next++
		return looptest.Result("Done. <task-done>" + env(req, "RALPH_TASK_ID") + "</task-done>"), nil
	})
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs, cfg.Once = false, false, true
	var peak, base float64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		debug.FreeOSMemory()
		before := resetPeakRSS(b)
		b.StartTimer()
		rep, err := loop.Run(b.Context(), cfg, progress.Recorder{Store: store}, agent)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Outcome != loop.OutcomeLimitReached || rep.Iterations != 1 {
			b.Fatalf("outcome %s after %d iterations (%s), want the iteration limit after 1", rep.Outcome, rep.Iterations, rep.Message)
		}
		b.StopTimer()
		if p := peakRSSMB(b); p > peak {
			peak, base = p, before
		}
		b.StartTimer()
	}
	d, err := store.Doc(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	tasks := d.Tasks()
	if last := tasks[len(tasks)-len(boxes)+next-1]; !last.Checked {
		b.Fatalf("the last task claimed, %s, is not ticked", last.ID)
	}
	b.ReportMetric(peak, "peak-RSS-MB")
	b.ReportMetric(base, "base-RSS-MB")
	b.ReportMetric(float64(size)/(1<<20), "file-MB")
}

// writeBigFile writes a progress file of at least n bytes: phases of 20
// boxes, each with a note, the first nine phases ticked; five attempts; an
// Iteration Log. The boxes take 90% of the file, or with log, 20 phases
// and the log the rest. It returns the size and the offsets of the
// unticked boxes' "[ ]" spaces, in file order.
func writeBigFile(tb testing.TB, path string, n int, log bool) (int, []int64) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	size := 0
	put := func(format string, a ...any) {
		k, _ := fmt.Fprintf(w, format, a...)
		size += k
	}
	var boxes []int64
	put("# Progress: big\n\n## Status\nIn Progress\n\n## Tasks\n")
	for p := 1; (log && p <= 20) || (!log && size < n*9/10); p++ {
		put("\n### Phase %d: part %d\n", p, p)
		for i := 1; i <= 20; i++ {
			mark := " "
			if p < 10 {
				mark = "x"
			} else {
				boxes = append(boxes, int64(size+3))
			}
			put("- [%s] Task %d of phase %d\n  A note about task %d of phase %d.\n", mark, i, p, i, p)
		}
	}
	put("\n## Recent Attempts\n")
	for i := 1; i <= 5; i++ {
		put("### Iteration %d\n- Tried: x\n- Result: y\n- Next: z\n\n", i)
	}
	put("## Iteration Log\n| Iteration | Started | Duration | Tasks Completed | Notes |\n|---|---|---|---|---|\n")
	for i := 1; size < n; i++ {
		put("| %d | 2026-01-29T10:00:00Z | 1m0s | 1 | task-%d-of-phase-%d: done |\n", i, i, i)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return size, boxes
}

// resetPeakRSS resets this process's peak resident set (Linux: writing 5
// to /proc/self/clear_refs) and returns the resident set now, in MB.
func resetPeakRSS(tb testing.TB) float64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Skipf("cannot reset the peak RSS: %v", err)
	}
	return procStatusMB(tb, "VmRSS:")
}

// peakRSSMB is this process's peak resident set since the last reset, in
// MB.
func peakRSSMB(tb testing.TB) float64 { return procStatusMB(tb, "VmHWM:") }

func procStatusMB(tb testing.TB, field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	tb.Skipf("no %s in /proc/self/status", field)
	return 0
}
