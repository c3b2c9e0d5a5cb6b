package loop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// benchTreeFiles is the size of the tree the guard benchmark snapshots.
const benchTreeFiles = 10_000

// benchTree writes 10,000 files of about 1 KB in 100 directories under a
// new root, and commits them when repo is set.
func benchTree(b *testing.B, repo bool) string {
	b.Helper()
	root := b.TempDir()
	body := strings.Repeat("package x // some source code of a kilobyte or so\n", 20)
	for i := range benchTreeFiles {
		p := filepath.Join(root, fmt.Sprintf("pkg%02d", i%100), fmt.Sprintf("file%04d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body+fmt.Sprint(i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*.o\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if repo {
		for _, args := range [][]string{
			{"init", "-q"}, {"add", "-A"},
			{"-c", "user.email=b@example.com", "-c", "user.name=bench", "commit", "-q", "-m", "tree"},
		} {
			cmd := exec.Command("git", args...)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
	}
	return root
}

// BenchmarkTreeGuard measures what --verify adds to each verification, on
// a tree of 10,000 files: the snapshot before the session and the
// comparison after it.
//
// unchanged: the verifier changed nothing (the usual case), with the stat
// cache warm (every verification after a run's first). one-change: the
// verifier edited one file, which is restored. cold: the first snapshot
// with an empty store (a project's first verification: every file is
// read and stored), without the comparison.
func BenchmarkTreeGuard(b *testing.B) {
	for _, repo := range []bool{true, false} {
		name := "git"
		if !repo {
			name = "plain"
		}
		b.Run(name, func(b *testing.B) {
			root := benchTree(b, repo)
			ctx := b.Context()
			g, err := newTreeGuard(ctx, root, "agent-bench")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := g.snapshot(ctx); err != nil {
				b.Fatal(err)
			}
			b.Run("unchanged", func(b *testing.B) {
				for b.Loop() {
					before, err := g.snapshot(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if cs, err := g.check(ctx, before); err != nil || len(cs) > 0 {
						b.Fatalf("changes %v, %v", cs, err)
					}
				}
			})
			b.Run("unchanged-with-repository", func(b *testing.B) {
				// The verification as a run does it: the repository's
				// refs, index, hooks, config, info/ and ralph's prompts
				// recorded and compared too, and the store inspected.
				g.meta = &repoGuard{repo: g.proj, root: root}
				defer func() { g.meta = nil }()
				for b.Loop() {
					before, err := g.record(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if cs, err := g.checkAll(ctx, before); err != nil || len(cs) > 0 {
						b.Fatalf("changes %v, %v", cs, err)
					}
				}
			})
			b.Run("one-change", func(b *testing.B) {
				p := filepath.Join(root, "pkg07", "file0007.go")
				for b.Loop() {
					before, err := g.snapshot(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if err := os.WriteFile(p, []byte("tampered"), 0o644); err != nil {
						b.Fatal(err)
					}
					if cs, err := g.check(ctx, before); err != nil || len(cs) != 1 {
						b.Fatalf("changes %v, %v", cs, err)
					}
				}
			})
			b.Run("cold", func(b *testing.B) {
				for b.Loop() {
					if err := g.rebuild(ctx); err != nil {
						b.Fatal(err)
					}
					os.Remove(g.index)
					if _, err := g.snapshot(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
