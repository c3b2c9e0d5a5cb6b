package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// An empty or schema-less database file is not a new plan: only
// init makes one. Every other command names the file in an error (exit 1)
// and leaves it as it was.
func TestEmptyDatabaseIsNotAPlan(t *testing.T) {
	for _, tt := range []struct{ name, content string }{
		{"0 bytes", ""},
		{"an empty SQLite file", "sqlite"}, // made below
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := initHarness(t)
			db := filepath.Join(h.dir, ".ralph", "progress.db")
			if err := os.Remove(db); err != nil {
				t.Fatal(err)
			}
			if tt.content == "sqlite" {
				// sqlite3 is not on every machine: a database the driver
				// makes, with a page and no table.
				if out, err := exec.Command("sh", "-c", "command -v sqlite3").Output(); err == nil && len(out) > 0 {
					if err := exec.Command("sqlite3", db, "PRAGMA user_version = 0; VACUUM;").Run(); err != nil {
						t.Fatal(err)
					}
				} else {
					t.Skip("sqlite3 is not installed")
				}
			} else if err := os.WriteFile(db, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			before := h.files()
			for _, cmd := range [][]string{{"task", "list"}, {"task", "plan-status"}, {"task", "add", "x"}, {"status"}, {"build", "--dry-run"}} {
				r := h.run(cmd...)
				if r.code != 1 || !strings.Contains(r.stderr, "progress.db") || !strings.Contains(r.stderr, "ralph init") {
					t.Errorf("%v: exit %d, stderr %q; want 1 naming the file and init", cmd, r.code, r.stderr)
				}
			}
			if diff := cmp.Diff(before, h.files()); diff != "" {
				t.Errorf("the commands changed files (-before +after):\n%s", diff)
			}
			// init makes it a plan.
			h.ok("init")
			h.add("Now it works")
		})
	}
}

// mount runs mount(8) with args, undoing it at the end of the test. It
// needs root (CI runs as root); elsewhere the test is skipped, saying so.
func mount(t *testing.T, target string, args ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		msg := "mounting a tmpfs or a read-only bind needs root"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if out, err := exec.Command("mount", append(args, target)...).CombinedOutput(); err != nil {
		msg := "mount " + strings.Join(args, " ") + ": " + err.Error() + ": " + string(out)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", target).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", target, err, out)
		}
	})
}

// On a full disk the read commands still work, and a write says "no space
// left on device" instead of SQLite's "disk I/O error (4874)".
func TestFullDisk(t *testing.T) {
	h := newHarness(t)
	mount(t, h.dir, "-t", "tmpfs", "-o", "size=2m", "tmpfs")
	h.ok("init")
	h.add("Before the disk filled up")
	// Fill the disk.
	f, err := os.Create(filepath.Join(h.dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()

	for _, cmd := range [][]string{{"task", "list"}, {"task", "plan-status"}, {"task", "peek"}, {"status"}} {
		if r := h.run(cmd...); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "") || r.stderr != "" {
			t.Errorf("%v on a full disk: exit %d, stderr %q; want it to work", cmd, r.code, r.stderr)
		}
	}
	if got := h.ok("task", "list"); !strings.Contains(got, "Before the disk filled up") {
		t.Errorf("task list on a full disk:\n%s", got)
	}
	r := h.run("task", "add", "After")
	if r.code != 1 || !strings.Contains(r.stderr, "no space left on device") || strings.Contains(r.stderr, "4874") {
		t.Errorf("task add on a full disk: exit %d, stderr %q; want 1 saying no space left on device", r.code, r.stderr)
	}
}

// With .ralph/ read-only, the read commands work and a write says the
// directory is read-only, not "unable to open database file (14)".
func TestReadOnlyProject(t *testing.T) {
	h := initHarness(t)
	h.add("Planned before")
	ralph := filepath.Join(h.dir, ".ralph")
	mount(t, ralph, "--bind", ralph)
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", ralph).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	for _, cmd := range [][]string{{"task", "list"}, {"task", "plan-status"}, {"task", "peek"}, {"task", "show", "t-1"}, {"status"}} {
		if r := h.run(cmd...); r.code != 0 || r.stderr != "" {
			t.Errorf("%v with .ralph read-only: exit %d, stderr %q; want it to work", cmd, r.code, r.stderr)
		}
	}
	if got := h.ok("task", "plan-status"); got != "open=1 active=0 done=0 failed=0 blocked=0 total=1\n" {
		t.Errorf("plan-status: %s", got)
	}
	r := h.run("task", "add", "After")
	if r.code != 1 || !strings.Contains(r.stderr, ".ralph is read-only") || strings.Contains(r.stderr, "(14)") {
		t.Errorf("task add with .ralph read-only: exit %d, stderr %q; want 1 saying .ralph is read-only", r.code, r.stderr)
	}
}
