package loop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/hostgit"
)

// BenchmarkCommitGate is the commit gate of one iteration that changed one
// file, in a repository of 100 and of 10,000 files: staging (diff-files,
// ls-files, update-index), the empty check and git commit, each through
// hostgit.
func BenchmarkCommitGate(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git is not installed")
	}
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			root := b.TempDir()
			for i := range n {
				p := filepath.Join(root, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.txt", i))
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, fmt.Appendf(nil, "file %d\n", i), 0o644)
			}
			for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=a", "-c", "user.email=b", "commit", "-q", "-m", "init"},
				{"config", "user.name", "a"}, {"config", "user.email", "b"}} {
				cmd := exec.Command("git", args...)
				cmd.Dir = root
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			// Past hostgit's racy window for the config just written.
			time.Sleep(2100 * time.Millisecond)
			commit := gateCommitter(b, root)
			i := 0
			for b.Loop() {
				i++
				os.WriteFile(filepath.Join(root, "d00", "f00000.txt"), fmt.Appendf(nil, "change %d\n", i), 0o644)
				if err := commit(fmt.Sprintf("iteration %d", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// gateCommitter is the commit gate as a run calls it.
func gateCommitter(b *testing.B, root string) func(msg string) error {
	repo, err := hostgit.Find(root)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { b.Logf("%d configuration listings", repo.Listings()) })
	return func(msg string) error { return commitAll(b.Context(), repo, root, msg) }
}
