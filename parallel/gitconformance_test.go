package parallel_test

import (
	"testing"

	"github.com/ralph-dev/ralph/parallel"
	"github.com/ralph-dev/ralph/parallel/gittest"
)

// TestGitConformance holds the fake Git of the policy tests and ExecGit
// to one contract (gittest.TestGit), ExecGit to the trust rules of
// ARCHITECTURE.md §7 as well.
func TestGitConformance(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		gittest.TestGit(t, func(_ *testing.T, files map[string]string) gittest.Repo {
			return fakeRepo{parallel.NewFakeRepo(files)}
		})
	})
	t.Run("exec", func(t *testing.T) {
		gittest.TestGit(t, func(t *testing.T, files map[string]string) gittest.Repo {
			return gittest.NewExecRepo(t, files)
		})
	})
}

// fakeRepo is parallel.FakeRepo as a gittest.Repo.
type fakeRepo struct{ *parallel.FakeRepo }

func (r fakeRepo) Clone(testing.TB) gittest.Repo { return fakeRepo{r.CloneFake()} }
