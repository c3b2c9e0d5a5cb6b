package loop

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/safefile"
)

func TestChangeList(t *testing.T) {
	many := make([]treeChange, 13)
	for i := range many {
		many[i] = treeChange{Path: fmt.Sprintf("f%02d.go", i), Status: 'M'}
	}
	tests := []struct {
		name string
		cs   []treeChange
		want string
	}{
		{"one", []treeChange{{Path: "a.txt", Status: 'M'}}, "a.txt"},
		{"names that would read as two are quoted", []treeChange{{Path: "a, b", Status: 'A'}, {Path: "new\nline", Status: 'D'}, {Path: "sp ace", Status: 'A'}},
			`"a, b", "new\nline", sp ace`},
		{"at most ten", many, "f00.go, f01.go, f02.go, f03.go, f04.go, f05.go, f06.go, f07.go, f08.go, f09.go, and 3 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := changeList(tt.cs); got != tt.want {
				t.Errorf("changeList = %q, want %q", got, tt.want)
			}
		})
	}
}

// The copy of an index keeps its time: a copy that looked newer would let
// git take racily changed files for clean ones.
func TestCopyFileKeepsModTime(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "index"), filepath.Join(dir, "index-copy")
	if err := os.WriteFile(from, []byte("DIRC"), 0o644); err != nil {
		t.Fatal(err)
	}
	then := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	if err := os.Chtimes(from, then, then); err != nil {
		t.Fatal(err)
	}
	st, err := safefile.OpenDir(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := copyFileIn(st, "index", "index-copy"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(to)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(then) {
		t.Errorf("copy's time %v, want %v", fi.ModTime(), then)
	}
}

// A run's end merges the store's packs when there are many, keeping what
// the next run's restores need.
func TestTreeGuardCloseMergesPacks(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("keep.txt", "kept across runs\n")
	g, err := newTreeGuard(ctx, root, "agent-00000001")
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxPacks + 2 {
		write("changing.txt", fmt.Sprintf("version %d\n", i))
		if _, err := g.snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	packs := func() int {
		t.Helper()
		ps, err := filepath.Glob(filepath.Join(g.dir, "objects", "pack", "*.pack"))
		if err != nil {
			t.Fatal(err)
		}
		return len(ps)
	}
	if n := packs(); n <= maxPacks {
		t.Fatalf("%d packs after %d snapshots with new content; want more than %d", n, maxPacks+2, maxPacks)
	}
	g.close(ctx, true)
	if n := packs(); n != 1 {
		t.Errorf("%d packs after close, want 1", n)
	}

	// The next run restores from the merged store.
	g, err = newTreeGuard(ctx, root, "agent-00000002")
	if err != nil {
		t.Fatal(err)
	}
	before, err := g.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write("keep.txt", "tampered\n")
	write("changing.txt", "tampered\n")
	cs, err := g.check(ctx, before)
	if err != nil || len(cs) != 2 {
		t.Fatalf("check: %v, %v; want 2 changes restored", cs, err)
	}
	for name, want := range map[string]string{"keep.txt": "kept across runs\n", "changing.txt": fmt.Sprintf("version %d\n", maxPacks+1)} {
		if got, _ := os.ReadFile(filepath.Join(root, name)); string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	g.close(ctx, true)
	if left, _ := filepath.Glob(filepath.Join(g.dir, "index-*")); len(left) > 0 {
		t.Errorf("run index files left behind: %v", left)
	}
}
