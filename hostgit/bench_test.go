package hostgit_test

import (
	"os/exec"
	"testing"

	"github.com/ralph-dev/ralph/hostgit"
)

// BenchmarkRun is the cost of one git command (git rev-parse HEAD)
// through hostgit against the same command run plainly: the difference
// is building the environment and the stat calls that tell the cached
// configuration still holds.
func BenchmarkRun(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git is not installed")
	}
	dir := b.TempDir()
	for _, args := range [][]string{{"init", "-q", dir}, {"-C", dir, "-c", "user.name=a", "-c", "user.email=b", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("git", "rev-parse", "HEAD")
			cmd.Dir = dir
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hostgit", func(b *testing.B) {
		defer hostgit.SetRacyWindow(hostgit.SetRacyWindow(0))
		r, err := hostgit.Find(dir)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := r.Run(b.Context(), "", "rev-parse", "HEAD"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("env-only", func(b *testing.B) {
		defer hostgit.SetRacyWindow(hostgit.SetRacyWindow(0))
		r, err := hostgit.Find(dir)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := r.Env(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
