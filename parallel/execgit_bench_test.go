package parallel_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
	"github.com/ralph-dev/ralph/parallel"
)

// BenchmarkIntegrationGit measures ralph's git work for one task on a
// repository of 10,000 files: Switch a worktree to the task branch at the
// integration tip, Commit the agent's one-file change, Rebase it onto a
// tip another worker moved meanwhile, SwapRef the tip.
//
// Besides ns/op (everything, the tip's move included) it reports
// switch-ms/op, integrate-ms/op (Commit, Rebase and SwapRef: the cost
// issue 10 bounds at 100 ms) and tip-ms/op (the other worker's commit,
// made with plumbing; not ralph's cost).
func BenchmarkIntegrationGit(b *testing.B) {
	needGit(b)
	ctx := b.Context()
	repo := benchRepo(b)
	const dirs, perDir = 100, 100
	g := &parallel.ExecGit{Root: repo}
	start, ok, err := g.Resolve(ctx, "refs/heads/main")
	if err != nil || !ok {
		b.Fatal(ok, err)
	}
	const integ = "refs/heads/ralph/integration/bench"
	const task = "refs/heads/ralph/task/bench"
	if err := g.CreateRef(ctx, integ, start); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "worker")
	if err := g.AddWorktree(ctx, dir, start); err != nil {
		b.Fatal(err)
	}

	settle()
	var switching, integrating, moving time.Duration
	tip, n := start, 0
	for b.Loop() {
		t0 := time.Now()
		if err := g.Switch(ctx, dir, task, tip); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		name := filepath.Join(dir, fmt.Sprintf("d%02d", n%dirs), fmt.Sprintf("f%02d.txt", n/dirs%perDir))
		if err := os.WriteFile(name, []byte(fmt.Sprintf("task %d\n", n)), 0o644); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, changed, err := g.Commit(ctx, dir, tip, fmt.Sprintf("Task %d\n\nRalph-Task: t-%d\n", n, n), nil); err != nil || !changed {
			b.Fatal(changed, err)
		}
		t3 := time.Now()
		moved := moveTip(b, repo, integ, tip, n)
		t4 := time.Now()
		head, err := g.Rebase(ctx, dir, tip, moved)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.SwapRef(ctx, integ, head, moved); err != nil {
			b.Fatal(err)
		}
		t5 := time.Now()
		switching += t1.Sub(t0)
		integrating += t3.Sub(t2) + t5.Sub(t4)
		moving += t4.Sub(t3)
		tip = head
		n++
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(n) }
	b.ReportMetric(ms(switching), "switch-ms/op")
	b.ReportMetric(ms(integrating), "integrate-ms/op")
	b.ReportMetric(ms(moving), "tip-ms/op")
}

// benchRepo makes the benchmarks' repository: main, one commit of 10,000
// files, d00/f00.txt … d99/f99.txt, and tip.txt.
func benchRepo(b *testing.B) string {
	repo := filepath.Join(b.TempDir(), "repo")
	gitT(b, b.TempDir(), "init", "--quiet", "--initial-branch=main", repo)
	// One commit of 10,000 files by fast-import, straight into a pack:
	// the main worktree stays empty (nothing here uses it, and creating
	// 10,000 files takes seconds on some filesystems) and no automatic
	// gc follows 10,000 loose objects.
	const dirs, perDir = 100, 100
	var stream strings.Builder
	stream.WriteString("commit refs/heads/main\ncommitter Bench <bench@example.com> 1700000000 +0000\ndata 12\n10,000 files\n")
	for d := range dirs {
		for f := range perDir {
			content := fmt.Sprintf("file %d/%d\n", d, f)
			fmt.Fprintf(&stream, "M 100644 inline d%02d/f%02d.txt\ndata %d\n%s\n", d, f, len(content), content)
		}
	}
	stream.WriteString("M 100644 inline tip.txt\ndata 2\n0\n\n")
	gitIn(b, repo, stream.String(), "fast-import", "--quiet")

	return repo
}

// settle waits out hostgit's racy window for the configuration git init
// has just written (a command reads it again while it is that new); a
// run's configuration is older.
func settle() { time.Sleep(2100 * time.Millisecond) }

// moveTip commits a change of tip.txt on top of tip, as another worker's
// integration would, without a worktree, and moves ref to it.
func moveTip(b *testing.B, repo, ref, tip string, n int) string {
	b.Helper()
	blob := gitIn(b, repo, fmt.Sprintf("other %d\n", n), "hash-object", "-w", "--stdin")
	var tree strings.Builder
	for line := range strings.SplitSeq(gitIn(b, repo, "", "ls-tree", tip), "\n") {
		if strings.HasSuffix(line, "\ttip.txt") {
			line = "100644 blob " + blob + "\ttip.txt"
		}
		tree.WriteString(line + "\n")
	}
	treeID := gitIn(b, repo, tree.String(), "mktree")
	commit := gitIn(b, repo, "", "-c", "user.name=Other", "-c", "user.email=other@example.com",
		"commit-tree", treeID, "-p", tip, "-m", fmt.Sprint("other ", n))
	gitIn(b, repo, "", "update-ref", ref, commit, tip)
	return commit
}

// gitIn is gitT with standard input.
func gitIn(tb testing.TB, dir, stdin string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// BenchmarkWorkspaceTask is one task through a worker's workspace over
// ExecGit on the 10,000-file repository: Begin (the tree checked and
// readied at the integration tip, the tip checked against the landings
// recorded), the agent's one-file change, then Integrate onto a tip
// another worker moved meanwhile (the tree checked, commit with the
// trailers, replay, the landing recorded, compare-and-swap, confirmed,
// the task branch following). It reports begin-ms/op and integrate-ms/op:
// ralph's own cost at integration, which issue 10 bounds at 100 ms. The
// landings go to an in-memory store (store=memory) or a SQLite plan
// (store=sqlite, the store's writes included). integrate-cpu-ms/op is the
// processor time of Integrate, ralph's and git's, which a busy machine
// does not stretch.
func BenchmarkWorkspaceTask(b *testing.B) {
	b.Run("store=memory", func(b *testing.B) { benchWorkspaceTask(b, looptest.NewMemStore(nil)) })
	b.Run("store=sqlite", func(b *testing.B) {
		s, err := dag.Open(b.Context(), filepath.Join(b.TempDir(), "progress.db"), dag.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		benchWorkspaceTask(b, s)
	})
}

func benchWorkspaceTask(b *testing.B, store loop.LandingStore) {
	needGit(b)
	ctx := b.Context()
	repo := benchRepo(b)
	g := &parallel.ExecGit{Root: repo}
	start, _, err := g.Resolve(ctx, "refs/heads/main")
	if err != nil {
		b.Fatal(err)
	}
	const integ = "refs/heads/ralph/integration"
	if err := g.CreateRef(ctx, integ, start); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "w1")
	if err := g.AddWorktree(ctx, dir, start); err != nil {
		b.Fatal(err)
	}
	ws := parallel.NewWorkspace(g, store, dir, "w1", integ)
	settle()
	var beginning, integrating, integratingCPU time.Duration
	n := 0
	for b.Loop() {
		task := loop.Task{ID: fmt.Sprintf("t-%d", n), Title: "Task", Generation: 1}
		t0 := time.Now()
		if landed, err := ws.Begin(ctx, task, 0); err != nil || landed {
			b.Fatal(landed, err)
		}
		t1 := time.Now()
		name := filepath.Join(dir, fmt.Sprintf("d%02d", n%100), fmt.Sprintf("f%02d.txt", n/100%100))
		if err := os.WriteFile(name, []byte(fmt.Sprintf("task %d\n", n)), 0o644); err != nil {
			b.Fatal(err)
		}
		tip, _, _ := g.Resolve(ctx, integ)
		other := moveTip(b, repo, integ, tip, n)
		// The other worker's landing, as it records it.
		if err := store.RecordLanding(ctx, loop.Landing{Branch: "ralph/integration", Commit: other, Parent: tip, TaskID: fmt.Sprintf("o-%d", n), Generation: 1}); err != nil {
			b.Fatal(err)
		}
		if err := store.ConfirmLanding(ctx, "ralph/integration", other); err != nil {
			b.Fatal(err)
		}
		t2, c2 := time.Now(), cpuTime()
		res, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: task, Summary: "did it"})
		if err != nil || !res.Replayed {
			b.Fatal(res, err)
		}
		t3, c3 := time.Now(), cpuTime()
		beginning += t1.Sub(t0)
		integrating += t3.Sub(t2)
		integratingCPU += c3 - c2
		n++
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(n) }
	b.ReportMetric(ms(beginning), "begin-ms/op")
	b.ReportMetric(ms(integrating), "integrate-ms/op")
	b.ReportMetric(ms(integratingCPU), "integrate-cpu-ms/op")
}
