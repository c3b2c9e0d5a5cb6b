package loop

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	if err := copyFile(from, to); err != nil {
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
