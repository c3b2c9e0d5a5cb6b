package parallel_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
	"github.com/ralph-dev/ralph/parallel"
)

// TestWorkspaceWorkAlreadyOnTip: over a real repository, an attempt whose
// changes are the integration tip's already — another worker landed the
// same change meanwhile, the agent brought the tip's commits into its
// tree, or it reset its HEAD back and made again the change that was
// there — lands nothing: done, no commit, no error, the branch where it
// was and no landing recorded for it. (A landing of a commit on itself
// was ErrLandingExists, a git failure: the build stopped with exit 5.)
func TestWorkspaceWorkAlreadyOnTip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// other, if set, is what worker w2 lands while w1's attempt works.
		other map[string]string
		// work is w1's agent, in its tree dir; tip is the integration tip.
		work func(t *testing.T, dir, tip string)
	}{
		{"the same change landed meanwhile", map[string]string{"same.txt": "same\n"}, func(t *testing.T, dir, _ string) {
			writeFiles(t, dir, map[string]string{"same.txt": "same\n"})
		}},
		{"the agent brings the tip into its tree", map[string]string{"b.txt": "b\n"}, func(t *testing.T, dir, tip string) {
			gitT(t, dir, "reset", "-q", "--hard", tip)
		}},
		{"the agent resets back and makes the change again", nil, func(t *testing.T, dir, _ string) {
			gitT(t, dir, "reset", "-q", "--hard", "HEAD~1")
			writeFiles(t, dir, map[string]string{"first.txt": "first\n"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			repo := newRepo(t)
			g := &parallel.ExecGit{Root: repo}
			const integ = "refs/heads/ralph/integration"
			if err := g.CreateRef(ctx, integ, gitT(t, repo, "rev-parse", "HEAD")); err != nil {
				t.Fatal(err)
			}
			store := looptest.NewMemStore(nil)
			trees := t.TempDir()
			worker := func(name string) (loop.Workspace, string) {
				dir := filepath.Join(trees, name)
				if err := g.AddWorktree(ctx, dir, gitT(t, repo, "rev-parse", integ)); err != nil {
					t.Fatal(err)
				}
				return parallel.NewWorkspace(g, store, dir, name, integ), dir
			}
			land := func(ws loop.Workspace, tk loop.Task) loop.IntegrateResult {
				t.Helper()
				res, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk})
				if err != nil {
					t.Fatalf("Integrate(%s) = %v", tk.ID, err)
				}
				return res
			}
			begin := func(ws loop.Workspace, tk loop.Task) {
				t.Helper()
				if landed, err := ws.Begin(ctx, tk, 0); err != nil || landed {
					t.Fatal(landed, err)
				}
			}
			w1, dir1 := worker("w1")
			first := loop.Task{ID: "first", Title: "first", Generation: 1}
			begin(w1, first)
			writeFiles(t, dir1, map[string]string{"first.txt": "first\n"})
			if res := land(w1, first); res.Commit == "" {
				t.Fatal("the first task did not land")
			}
			a := loop.Task{ID: "a", Title: "a", Generation: 1}
			begin(w1, a)
			if tc.other != nil {
				w2, dir2 := worker("w2")
				b := loop.Task{ID: "b", Title: "b", Generation: 1}
				begin(w2, b)
				writeFiles(t, dir2, tc.other)
				if res := land(w2, b); res.Commit == "" {
					t.Fatal("w2's task did not land")
				}
			}
			tip := gitT(t, repo, "rev-parse", integ)
			tc.work(t, dir1, tip)
			if res := land(w1, a); res.Commit != "" {
				t.Errorf("a landed as %s; want nothing to land", res.Commit)
			}
			if now := gitT(t, repo, "rev-parse", integ); now != tip {
				t.Errorf("the branch moved from %s to %s", tip, now)
			}
			ls, err := store.Landings(ctx, loop.LandingQuery{Branch: "ralph/integration", TaskID: "a"})
			if err != nil || len(ls) != 0 {
				t.Errorf("a's landings: %+v, %v; want none", ls, err)
			}
			// The worker goes on: its next attempt lands.
			c := loop.Task{ID: "c", Title: "c", Generation: 1}
			begin(w1, c)
			writeFiles(t, dir1, map[string]string{"c.txt": "c\n"})
			if res := land(w1, c); res.Commit == "" {
				t.Fatal("the next task did not land")
			}
			want := map[string]string{"a.txt": "a\n", "first.txt": "first\n", "c.txt": "c\n"}
			for k, v := range tc.other {
				want[k] = v
			}
			if diff := cmp.Diff(want, treeFiles(t, repo, integ)); diff != "" {
				t.Errorf("the branch (-want +got):\n%s", diff)
			}
		})
	}
}
