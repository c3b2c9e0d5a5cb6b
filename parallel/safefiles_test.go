package parallel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/safefile"
)

// files ralph writes into and beside a worker's tree are never written
// through a link the agent planted there.
func TestTreeFilesRefuseLinks(t *testing.T) {
	setup := func(t *testing.T) (root, tree, outside string) {
		t.Helper()
		top := t.TempDir()
		root = filepath.Join(top, "proj")
		tree = filepath.Join(root, ".ralph", "worktrees", "w1")
		outside = filepath.Join(top, "home")
		for _, d := range []string{filepath.Join(root, "config"), tree, outside} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for p, c := range map[string]string{
			filepath.Join(root, ".env"):            "KEY=1\n",
			filepath.Join(root, "config", "a.env"): "A=1\n",
			filepath.Join(outside, "bashrc"):       "export PATH\n",
		} {
			if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root, tree, outside
	}
	unchanged := func(t *testing.T, outside string) {
		t.Helper()
		if b, _ := os.ReadFile(filepath.Join(outside, "bashrc")); string(b) != "export PATH\n" {
			t.Errorf("the file outside changed: %q", b)
		}
		entries, _ := os.ReadDir(outside)
		if len(entries) != 1 {
			t.Errorf("files made outside: %v", entries)
		}
	}

	// copied says that the include files are in the tree as real files
	// with the project's contents.
	copied := func(t *testing.T, tree string, files map[string]string) {
		t.Helper()
		for rel, want := range files {
			p := filepath.Join(tree, rel)
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("%s: %v, %v; want a regular file", rel, fi, err)
				continue
			}
			if b, _ := os.ReadFile(p); string(b) != want {
				t.Errorf("%s = %q; want %q", rel, b, want)
			}
		}
	}
	t.Run("include: a link at the destination is removed and the file copied", func(t *testing.T) {
		root, tree, outside := setup(t)
		if err := os.Symlink(filepath.Join(outside, "bashrc"), filepath.Join(tree, ".env")); err != nil {
			t.Fatal(err)
		}
		if err := copyInclude(root, tree, []string{".env", "config/a.env"}); err != nil {
			t.Fatal(err)
		}
		unchanged(t, outside)
		copied(t, tree, map[string]string{".env": "KEY=1\n", "config/a.env": "A=1\n"})
	})
	t.Run("include: a dangling link at the destination", func(t *testing.T) {
		root, tree, outside := setup(t)
		if err := os.Symlink(filepath.Join(outside, "new"), filepath.Join(tree, ".env")); err != nil {
			t.Fatal(err)
		}
		if err := copyInclude(root, tree, []string{".env"}); err != nil {
			t.Fatal(err)
		}
		unchanged(t, outside)
		copied(t, tree, map[string]string{".env": "KEY=1\n"})
	})
	t.Run("include: a file the agent edited stays", func(t *testing.T) {
		root, tree, _ := setup(t)
		if err := os.WriteFile(filepath.Join(tree, ".env"), []byte("KEY=2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := copyInclude(root, tree, []string{".env"}); err != nil {
			t.Fatal(err)
		}
		copied(t, tree, map[string]string{".env": "KEY=2\n"})
	})
	t.Run("include: a linked directory on the way is removed, not followed", func(t *testing.T) {
		root, tree, outside := setup(t)
		if err := os.Symlink(outside, filepath.Join(tree, "config")); err != nil {
			t.Fatal(err)
		}
		// Every later attempt copies again: each finds the link gone.
		for range 2 {
			if err := copyInclude(root, tree, []string{"config/a.env"}); err != nil {
				t.Fatalf("copy with a linked directory on the way: %v", err)
			}
		}
		unchanged(t, outside)
		copied(t, tree, map[string]string{"config/a.env": "A=1\n"})
	})
	t.Run("include: a link deeper on the way", func(t *testing.T) {
		root, tree, outside := setup(t)
		if err := os.MkdirAll(filepath.Join(root, "config", "deep"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "config", "deep", "b.env"), []byte("B=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(tree, "config"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(tree, "config", "deep")); err != nil {
			t.Fatal(err)
		}
		if err := copyInclude(root, tree, []string{"config/deep/b.env"}); err != nil {
			t.Fatal(err)
		}
		unchanged(t, outside)
		copied(t, tree, map[string]string{"config/deep/b.env": "B=1\n"})
	})
	t.Run("include: a source that is a link is refused", func(t *testing.T) {
		root, _, outside := setup(t)
		if err := os.WriteFile(filepath.Join(root, ".ralph", "worktree-include"), []byte("config/*.env\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, "bashrc"), filepath.Join(root, "config", "b.env")); err != nil {
			t.Fatal(err)
		}
		_, err := readInclude(root)
		if !errors.Is(err, safefile.ErrLink) || !strings.Contains(err.Error(), "b.env") {
			t.Errorf("readInclude with a linked source: %v, want a refused link naming it", err)
		}
	})
	t.Run("marker", func(t *testing.T) {
		root, tree, outside := setup(t)
		w := &workspace{root: root, dir: tree}
		if err := os.Symlink(filepath.Join(outside, "bashrc"), w.marker()); err != nil {
			t.Fatal(err)
		}
		if got := w.readMarker(); got != "" {
			t.Errorf("a linked marker read as %q", got)
		}
		if err := w.writeMarker("t-1"); err != nil {
			t.Fatal(err)
		}
		unchanged(t, outside)
		if got := w.readMarker(); got != "t-1" {
			t.Errorf("marker = %q, want t-1", got)
		}
		w.removeMarker()
		if _, err := os.Lstat(w.marker()); err == nil {
			t.Error("the marker is still there")
		}
	})
	t.Run("worktrees .gitignore and lock", func(t *testing.T) {
		root, tree, outside := setup(t)
		dir := filepath.Dir(tree)
		if err := os.Symlink(filepath.Join(outside, "bashrc"), filepath.Join(dir, ".gitignore")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, "new-lock"), filepath.Join(dir, "w2.lock")); err != nil {
			t.Fatal(err)
		}
		if _, err := prepareWorktreeDir(root, dir); err != nil {
			t.Fatal(err)
		}
		if _, _, err := takeTree(root, dir, "w2"); !errors.Is(err, safefile.ErrLink) {
			t.Errorf("a linked tree lock: %v, want a refused link", err)
		}
		unchanged(t, outside)
		f, ok, err := takeTree(root, dir, "w1")
		if err != nil || !ok {
			t.Fatalf("takeTree w1: %v %v", ok, err)
		}
		f.Close()
	})
	t.Run("worktrees directory is a link", func(t *testing.T) {
		root, tree, outside := setup(t)
		dir := filepath.Dir(tree)
		os.RemoveAll(dir)
		if err := os.Symlink(outside, dir); err != nil {
			t.Fatal(err)
		}
		if _, err := prepareWorktreeDir(root, dir); !errors.Is(err, safefile.ErrLink) {
			t.Errorf("prepareWorktreeDir through a link: %v, want a refused link", err)
		}
		unchanged(t, outside)
	})
}
