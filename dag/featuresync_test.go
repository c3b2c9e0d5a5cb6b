package dag_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/safefile"
)

// syncProject is a project with features new, down, newer and older, each
// with a spec under specs/, on a new plan of o's: new's spec is only in the
// project, down's only in the database, newer's changed in the project
// since the database's copy, older's changed in the database since the
// project's copy (mode 0600). It returns the store and the project's root.
func syncProject(t *testing.T, o *opener) (*dag.Store, string) {
	t.Helper()
	ctx := t.Context()
	s := o.open(t, newClock(testStart).Now)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "specs"), 0o755)
	for _, name := range []string{"new", "down", "newer", "older"} {
		if _, err := s.AddFeature(ctx, dag.FeatureParams{Name: name, SpecPath: "specs/" + name + ".md"}); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, content string, at time.Time, mode os.FileMode) {
		path := filepath.Join(root, "specs", name+".md")
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, at, at)
	}
	write("new", "new here", testStart.Add(-time.Hour), 0o644)
	write("newer", "newer here", testStart.Add(time.Hour), 0o644)
	write("older", "older here", testStart.Add(-time.Hour), 0o600)
	if s.Server() == nil {
		return s, root
	}
	for name, content := range map[string]string{"down": "down in db", "newer": "newer in db", "older": "older in db"} {
		if err := s.PutFeatureFile(ctx, "specs/"+name+".md", content); err != nil {
			t.Fatal(err)
		}
	}
	return s, root
}

// TestSyncFeatureFiles: on a server the newer copy of each feature file
// wins, a file written from the database keeps the project file's mode and
// takes the stored copy's time, and a second sync changes nothing; on
// SQLite nothing is stored or written.
func TestSyncFeatureFiles(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := t.Context()
		s, root := syncProject(t, o)
		if err := s.SyncFeatureFiles(ctx, root); err != nil {
			t.Fatalf("SyncFeatureFiles: %v", err)
		}
		read := func(name string) string {
			data, _ := os.ReadFile(filepath.Join(root, "specs", name+".md"))
			return string(data)
		}
		if s.Server() == nil {
			if _, err := s.FeatureFiles(ctx); !errors.Is(err, dag.ErrNoFeatureFiles) {
				t.Errorf("FeatureFiles on SQLite = %v; want ErrNoFeatureFiles", err)
			}
			if read("down") != "" || read("older") != "older here" {
				t.Errorf("SQLite: the project's files changed: down %q, older %q", read("down"), read("older"))
			}
			return
		}
		want := map[string]string{"new": "new here", "down": "down in db", "newer": "newer here", "older": "older in db"}
		for i := range 2 { // the second sync finds both sides equal
			stored, err := s.FeatureFiles(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for name, content := range want {
				if got := stored["specs/"+name+".md"].Content; got != content {
					t.Errorf("sync %d: stored %s = %q; want %q", i+1, name, got, content)
				}
				if got := read(name); got != content {
					t.Errorf("sync %d: project's %s = %q; want %q", i+1, name, got, content)
				}
			}
			fi, err := os.Stat(filepath.Join(root, "specs", "older.md"))
			if err != nil || fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(stored["specs/older.md"].UpdatedAt) {
				t.Errorf("sync %d: older.md written from the database: %v, %v; want mode 0600, dated %v", i+1, fi.Mode(), err, stored["specs/older.md"].UpdatedAt)
			}
			if err := s.SyncFeatureFiles(ctx, root); err != nil {
				t.Fatalf("SyncFeatureFiles again: %v", err)
			}
		}
	})
}

// TestSyncFeatureFilesFollowsNoLink: a spec that is a link (to a secret,
// say) is refused with safefile.ErrLink and never stored with the plan.
func TestSyncFeatureFilesFollowsNoLink(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := t.Context()
		s := o.open(t, newClock(testStart).Now)
		if s.Server() == nil {
			t.Skip("SQLite stores no feature files")
		}
		root := t.TempDir()
		secret := filepath.Join(t.TempDir(), "secret")
		os.WriteFile(secret, []byte("TOKEN=1"), 0o600)
		os.Symlink(secret, filepath.Join(root, "spec.md"))
		if _, err := s.AddFeature(ctx, dag.FeatureParams{Name: "auth", SpecPath: "spec.md"}); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncFeatureFiles(ctx, root); !errors.Is(err, safefile.ErrLink) {
			t.Errorf("SyncFeatureFiles = %v; want safefile.ErrLink", err)
		}
		if stored, err := s.FeatureFiles(ctx); err != nil || len(stored) != 0 {
			t.Errorf("stored %v, %v; want nothing", stored, err)
		}
	})
}
