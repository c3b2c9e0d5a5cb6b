package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite"
)

// seeded returns a project holding one task in each interesting state:
//
//	p (pending, parent of c)   c (pending child of p)
//	a (pending)                b (pending, blocked by a)
//	w (in_progress, by agent-w)  d (done)  f (failed)  k (blocked)
//
// and a feature "auth".
func seeded(t *testing.T) *harness {
	t.Helper()
	h := initHarness(t)
	h.ok("feature", "add", "auth")
	for _, args := range [][]string{
		{"Parent", "--id", "p"}, {"Child", "--id", "c", "--parent", "p"},
		{"A", "--id", "a"}, {"B", "--id", "b", "--blocked-by", "a"},
		{"W", "--id", "w", "-p", "0"}, {"D", "--id", "d", "-p", "0"}, {"F", "--id", "f", "-p", "0"}, {"K", "--id", "k"},
	} {
		h.add(args...)
	}
	h.ok("task", "claim", "d", "--agent", "agent-d")
	h.ok("task", "done", "d", "--summary", "done it")
	h.ok("task", "claim", "f", "--agent", "agent-f")
	h.ok("task", "fail", "f", "--reason", "broke it")
	h.ok("task", "claim", "w", "--agent", "agent-w")
	h.ok("task", "block", "k", "--reason", "wait")
	return h
}

// TestBadInput runs every kind of bad input of issue 2 against a seeded
// project: each must exit 1 with one line on stderr naming the problem,
// print nothing on stdout, and leave the database exactly as it was.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		stderr string // a part of the one-line message
	}{
		// Unknown ids.
		{"show unknown", []string{"task", "show", "nope"}, `no such task: "nope"`},
		{"done unknown", []string{"task", "done", "nope"}, `no such task: "nope"`},
		{"fail unknown", []string{"task", "fail", "nope", "--reason", "r"}, `no such task: "nope"`},
		{"reset unknown", []string{"task", "reset", "nope"}, `no such task: "nope"`},
		{"block unknown", []string{"task", "block", "nope"}, `no such task: "nope"`},
		{"unblock unknown", []string{"task", "unblock", "nope"}, `no such task: "nope"`},
		{"claim unknown", []string{"task", "claim", "nope", "--agent", "x"}, `no such task: "nope"`},
		{"dep add unknown blocker", []string{"task", "dep", "add", "a", "nope"}, `no such task: "nope"`},
		{"dep add unknown blocked", []string{"task", "dep", "add", "nope", "a"}, `no such task: "nope"`},
		{"dep rm missing dependency", []string{"task", "dep", "rm", "a", "b"}, "a is not blocked by b"},
		// Illegal moves, in words (TestIllegalMovesInWords has them all).
		{"done on pending", []string{"task", "done", "a"}, "task a is pending: it has not been claimed; claim it first with 'ralph task claim a'"},
		{"done on done", []string{"task", "done", "d"}, "task d is done already"},
		{"fail on pending", []string{"task", "fail", "a", "--reason", "r"}, "task a is pending: it has not been claimed, so it cannot fail"},
		{"claim done", []string{"task", "claim", "d", "--agent", "x"}, "task d is done"},
		{"claim in progress", []string{"task", "claim", "w", "--agent", "x"}, "task w is in progress: it is claimed already"},
		{"claim waiting on blocker", []string{"task", "claim", "b", "--agent", "x"}, "waiting for a"},
		{"claim a parent", []string{"task", "claim", "p", "--agent", "x"}, "not ready"},
		{"claim blocked", []string{"task", "claim", "k", "--agent", "x"}, "task k is blocked: return it to pending with 'ralph task unblock k'"},
		{"reset pending", []string{"task", "reset", "a"}, "task a is pending, not failed"},
		{"unblock pending", []string{"task", "unblock", "a"}, "task a is pending, not blocked"},
		{"block in progress", []string{"task", "block", "w"}, "task w is in progress: only a pending task can be blocked"},
		// The graph.
		{"dependency cycle", []string{"task", "dep", "add", "a", "b"}, "cycle"},
		{"self dependency", []string{"task", "dep", "add", "a", "a"}, "cycle"},
		{"parent does not exist", []string{"task", "add", "x", "--parent", "nope"}, `no such task: "nope"`},
		{"blocker does not exist", []string{"task", "add", "x", "--blocked-by", "nope"}, `no such task: "nope"`},
		{"feature does not exist", []string{"task", "add", "x", "--feature", "nope"}, `no such feature: "nope"`},
		{"duplicate id", []string{"task", "add", "x", "--id", "a"}, `task id already exists: "a"`},
		{"blank title", []string{"task", "add", "  "}, "title"},
		// Bad command lines.
		{"two titles", []string{"task", "add", "Fix", "login"}, "want one TITLE (quote it), got 2 arguments"},
		{"show without id", []string{"task", "show"}, "want ID, got 0 arguments"},
		{"dep add one id", []string{"task", "dep", "add", "a"}, "want BLOCKED BLOCKER, got 1 argument"},
		{"fail without reason", []string{"task", "fail", "w"}, "--reason is required"},
		{"fail with blank reason", []string{"task", "fail", "w", "--reason", " "}, "--reason is required"},
		{"unknown status", []string{"task", "list", "--status", "doing"}, `unknown status "doing"`},
		{"peek -n 0", []string{"task", "peek", "-n", "0"}, "-n 0: want at least 1"},
		{"negative lease", []string{"task", "claim", "--lease", "-1m"}, "--lease -1m0s: want a positive duration"},
		{"bad duration", []string{"task", "claim", "--lease", "soon"}, `invalid value "soon" for flag -lease`},
		{"bad priority", []string{"task", "add", "x", "-p", "high"}, `invalid value "high" for flag -p`},
		// Import, all or nothing.
		{"import missing file", []string{"task", "import", "/nonexistent/plan.jsonl"}, "no such file or directory"},
		{"import bad JSON on line 3", []string{"task", "import", "@bad.jsonl"}, "line 3: invalid JSON"},
		{"import unknown parent", []string{"task", "import", "@orphan.jsonl"}, "line 2"},
		{"import duplicate of an existing task", []string{"task", "import", "@dup.jsonl"}, "line 1"},
		{"import cycle", []string{"task", "import", "@cycle.jsonl"}, "cycle"},
		{"import parent loop", []string{"task", "import", "@parents.jsonl"}, "line "},
		{"import garbage", []string{"task", "import", "@garbage.txt"}, "neither JSON Lines nor a markdown checklist"},
		// Features.
		{"feature bad name", []string{"feature", "add", "../evil"}, `feature name "../evil"`},
		{"feature exists", []string{"feature", "add", "auth"}, "feature already exists"},
		{"feature spec missing", []string{"feature", "add", "new", "--spec", "/nonexistent/spec.md"}, "no such file or directory"},
	}
	files := map[string]string{
		"bad.jsonl":     `{"id":"n1","title":"ok"}` + "\n" + `{"id":"n2","title":"ok"}` + "\n" + `{"id":"n3",` + "\n",
		"orphan.jsonl":  `{"id":"n1","title":"ok"}` + "\n" + `{"id":"n2","title":"child","parent":"missing"}` + "\n",
		"dup.jsonl":     `{"id":"a","title":"again"}` + "\n",
		"cycle.jsonl":   `{"id":"n1","title":"x","blocked_by":["n2"]}` + "\n" + `{"id":"n2","title":"y","blocked_by":["n1"]}` + "\n",
		"garbage.txt":   "just some words\n",
		"parents.jsonl": `{"id":"n1","title":"x","parent":"n2"}` + "\n" + `{"id":"n2","title":"y","parent":"n1"}` + "\n",
	}
	seed := seeded(t)
	for name, content := range files {
		seed.write(name, content)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := seed.clone(t)
			args := append([]string(nil), tt.args...)
			for i, a := range args {
				if strings.HasPrefix(a, "@") {
					args[i] = filepath.Join(h.dir, a[1:])
				}
			}
			before, beforeFiles := h.dump(), h.files()
			r := h.run(args...)
			if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, "ralph: ") ||
				strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("ralph %s = exit %d, stdout %q, stderr %q\nwant exit 1, no stdout, one stderr line containing %q",
					strings.Join(tt.args, " "), r.code, r.stdout, r.stderr, tt.stderr)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("the database changed (-before +after):\n%s", diff)
			}
			for _, name := range []string{".ralph/progress.db-wal", ".ralph/progress.db-shm", ".ralph/progress.db"} {
				delete(beforeFiles, name)
			}
			afterFiles := h.files()
			for _, name := range []string{".ralph/progress.db-wal", ".ralph/progress.db-shm", ".ralph/progress.db"} {
				delete(afterFiles, name)
			}
			if diff := cmp.Diff(beforeFiles, afterFiles); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestClaimNothingReady(t *testing.T) {
	h := seeded(t)
	h.ok("task", "claim", "--agent", "x") // a
	h.ok("task", "claim", "--agent", "x") // c
	before := h.dump()
	r := h.run("task", "claim", "--agent", "x")
	want := result{code: 2, stderr: "ralph: no task is ready to claim\n"}
	if diff := cmp.Diff(want, r, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("claim with nothing ready (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("the database changed (-before +after):\n%s", diff)
	}
}

func TestNoProject(t *testing.T) {
	for _, args := range [][]string{
		{"task", "list"}, {"task", "peek"}, {"task", "add", "x"}, {"task", "claim"}, {"task", "plan-status"},
		{"task", "show", "x"}, {"task", "import", "-"}, {"task", "export"}, {"task", "release"},
		{"feature", "list"}, {"feature", "add", "x"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			h := newHarness(t)
			r := h.run(args...)
			want := result{code: 1, stderr: "ralph: no ralph project in " + h.dir + " (run 'ralph init')\n"}
			if diff := cmp.Diff(want, r, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"./": ""}, h.files()); diff != "" {
				t.Errorf("files appeared (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMissingDatabase(t *testing.T) {
	h := newHarness(t)
	h.write(".ralph/prompts/keep", "")
	r := h.run("task", "list")
	want := result{code: 1, stderr: "ralph: no task database at " + filepath.Join(h.dir, ".ralph", "progress.db") + " (run 'ralph init')\n"}
	if diff := cmp.Diff(want, r, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if fileExists(filepath.Join(h.dir, ".ralph", "progress.db")) {
		t.Error("a read command created the database")
	}
}

func TestCorruptDatabase(t *testing.T) {
	// (An empty file is not in this list: SQLite, and so the store, take it
	// for an empty database.)
	for _, content := range []string{"garbage that is not a database at all, not even close\n", strings.Repeat("\x00", 4096)} {
		h := newHarness(t)
		h.write(".ralph/progress.db", content)
		before := h.files()
		r := h.run("task", "list")
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "progress.db") {
			t.Errorf("list on a corrupt database (%d bytes) = %+v, want exit 1 with one line naming the file", len(content), r)
		}
		if diff := cmp.Diff(before, h.files()); diff != "" {
			t.Errorf("files changed (-before +after):\n%s", diff)
		}
	}
}

func TestLockedDatabase(t *testing.T) {
	h := seeded(t)
	before := h.dump()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(h.dir, ".ralph", "progress.db")+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("CREATE TABLE lock_holder (x)"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"task", "add", "x"}, {"task", "claim", "--agent", "x"}, {"task", "done", "w"}} {
		r := h.run(args...)
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "locked") {
			t.Errorf("ralph %s while another process writes = %+v, want exit 1 saying the database is locked", strings.Join(args, " "), r)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("the database changed (-before +after):\n%s", diff)
	}
}
