package parallel

import (
	"maps"
	"testing"
)

// FakeRepo is the fake Git the policy tests use, with the hands
// gittest.Repo asks for, so that the external tests hold it to the
// conformance suite (gittest.TestGit) beside ExecGit. Its Clone is
// CloneFake: the external test's adapter returns it as a gittest.Repo
// (this package cannot import gittest).
type FakeRepo struct{ g *fakeGit }

// NewFakeRepo returns a fake repository whose main holds files.
func NewFakeRepo(files map[string]string) *FakeRepo { return &FakeRepo{g: newFakeGit(files)} }

func (r *FakeRepo) Git() Git { return r.g }

func (r *FakeRepo) NewDir(_ testing.TB, name string) string { return "/fake/" + name }

func (r *FakeRepo) Write(_ testing.TB, dir string, files map[string]string) {
	for p, c := range files {
		r.g.write(dir, p, c)
	}
}

func (r *FakeRepo) CommitAll(_ testing.TB, dir, message string) string {
	return r.g.commitIn(dir, message)
}

func (r *FakeRepo) Files(_ testing.TB, commit string) map[string]string {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	return maps.Clone(r.g.commits[commit].files)
}

func (r *FakeRepo) TreeFiles(t testing.TB, dir string) map[string]string {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	tr, ok := r.g.trees[dir]
	if !ok {
		t.Fatalf("fake: no tree at %s", dir)
	}
	return maps.Clone(tr.files)
}

func (r *FakeRepo) BreakGitFile(_ testing.TB, dir string) {
	r.g.breakTree(dir, "its .git names no git directory", true)
}

// CloneFake is a new fake repository with this one as its "origin".
func (r *FakeRepo) CloneFake() *FakeRepo { return &FakeRepo{g: r.g.clone()} }
