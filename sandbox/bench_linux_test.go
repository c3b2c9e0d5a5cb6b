package sandbox

import (
	"os/exec"
	"testing"
)

// BenchmarkStart measures what the sandbox adds to starting a process:
// `true` run directly, and run in the sandbox with the writable paths of
// an agent in a worktree.
func BenchmarkStart(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true on PATH")
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(truePath).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sandboxed", func(b *testing.B) {
		s := findBwrap(b)
		dir := b.TempDir()
		pol := Policy{Dir: dir, Writable: Dirs(dir, []string{"TMPDIR=" + dir})}
		for b.Loop() {
			path, args, cleanup, err := s.Command(pol, truePath, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := exec.Command(path, args...).Run(); err != nil {
				b.Fatal(err)
			}
			cleanup()
		}
	})
}
