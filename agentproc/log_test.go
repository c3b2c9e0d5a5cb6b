package agentproc

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/safefile"
)

// TestRunRefusesPlantedLog: a link an agent planted at the raw stream's
// path, or on the way to it, is not followed; the session still runs and
// is decoded, unlogged, and Exit.LogErr says why.
func TestRunRefusesPlantedLog(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, root, log, outside string)
	}{
		{"symlink to a file outside", func(t *testing.T, _, log, outside string) {
			must(t, os.Symlink(outside, log))
		}},
		{"symlink that stays inside the project", func(t *testing.T, root, log, _ string) {
			must(t, os.WriteFile(filepath.Join(root, ".ralph", "progress.db"), []byte("the plan"), 0o644))
			must(t, os.Symlink("../../progress.db", log))
		}},
		{"hard link", func(t *testing.T, _, log, outside string) {
			if err := os.Link(outside, log); err != nil {
				t.Skipf("no hard links: %v", err)
			}
		}},
		{"log directory replaced by a link", func(t *testing.T, root, _, outside string) {
			logs := filepath.Join(root, ".ralph", "logs")
			must(t, os.RemoveAll(logs))
			must(t, os.MkdirAll(filepath.Join(filepath.Dir(outside), "s"), 0o755))
			must(t, os.Symlink(filepath.Dir(outside), logs))
		}},
		{"reopened after a wait, swapped for a link", func(t *testing.T, _, log, outside string) {
			must(t, os.Rename(log, log+".old"))
			must(t, os.Symlink(outside, log))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var evs events
			s := shSpec(t, `echo hello; echo result`, &evs)
			top := t.TempDir()
			root := filepath.Join(top, "proj")
			outside := filepath.Join(top, "home", "bashrc")
			must(t, os.MkdirAll(filepath.Dir(outside), 0o755))
			must(t, os.WriteFile(outside, []byte("export PATH\n"), 0o644))
			s.LogRoot = root
			s.LogPath = filepath.Join(root, ".ralph", "logs", "s", "iter-2.ndjson")
			must(t, os.MkdirAll(filepath.Dir(s.LogPath), 0o755))
			if c.name == "reopened after a wait, swapped for a link" {
				if _, err := Run(t.Context(), s); err != nil {
					t.Fatal(err)
				}
				evs = events{}
			}
			c.plant(t, root, s.LogPath, outside)
			exit, err := Run(t.Context(), s)
			if err != nil {
				t.Fatalf("Run: %v, want the session run without its log", err)
			}
			if !errors.Is(exit.LogErr, safefile.ErrLink) {
				t.Errorf("LogErr = %v, want a refused link", exit.LogErr)
			}
			if diff := cmp.Diff([]string{"hello"}, evs.texts(loop.EventText)); diff != "" {
				t.Errorf("the session was not decoded (-want +got):\n%s", diff)
			}
			if b, _ := os.ReadFile(outside); string(b) != "export PATH\n" {
				t.Errorf("the file outside changed: %q", b)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(outside), "s", "iter-2.ndjson")); err == nil {
				t.Error("the log was written through the linked directory")
			}
			if b, err := os.ReadFile(filepath.Join(root, ".ralph", "progress.db")); err == nil && string(b) != "the plan" {
				t.Errorf("the plan changed: %q", b)
			}
		})
	}
}

// TestRunLogWithoutRoot: a LogPath without LogRoot trusts its own
// directory (made if missing) and still refuses a link at the file.
func TestRunLogWithoutRoot(t *testing.T) {
	var evs events
	s := shSpec(t, `echo hello`, &evs)
	outside := filepath.Join(t.TempDir(), "bashrc")
	must(t, os.WriteFile(outside, []byte("x"), 0o644))
	exit, err := Run(t.Context(), s)
	if err != nil || exit.LogErr != nil {
		t.Fatalf("Run: %v %v", err, exit.LogErr)
	}
	must(t, os.Remove(s.LogPath))
	must(t, os.Symlink(outside, s.LogPath))
	exit, err = Run(t.Context(), s)
	if err != nil || !errors.Is(exit.LogErr, safefile.ErrLink) {
		t.Fatalf("Run: %v, LogErr %v, want a refused link", err, exit.LogErr)
	}
	if b, _ := os.ReadFile(outside); string(b) != "x" {
		t.Errorf("the file outside changed: %q", b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
