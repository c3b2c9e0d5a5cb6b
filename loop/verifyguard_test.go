package loop_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// fileState is one path of a tree as the verify tests compare it.
type fileState struct {
	Kind    string // "file", "symlink" or "dir"
	Content string // a file's content, a symlink's target
	Exec    bool
}

// readTree maps every path under root to its state: files, symlinks and
// directories, ignored or not, .ralph included; only .git directories and
// the verifier's own snapshot store are left out.
func readTree(t testing.TB, root string) map[string]fileState {
	t.Helper()
	tree := map[string]fileState{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || rel == ".ralph/verify-snapshot.git") {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			tree[rel] = fileState{Kind: "dir"}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			tree[rel] = fileState{Kind: "symlink", Content: target}
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree[rel] = fileState{Kind: "file", Content: string(b), Exec: info.Mode().Perm()&0o100 != 0}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// must fails the test on err; verifier steps run on the test's goroutine.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// commitAll makes root a git repository (if it is not one) and commits
// everything in it, ignored files named in force too.
func commitAll(t *testing.T, root string, force ...string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		git(t, root, "init", "-q")
		git(t, root, "config", "user.email", "ralph@example.com")
		git(t, root, "config", "user.name", "ralph test")
	}
	git(t, root, "add", "-A")
	if len(force) > 0 {
		git(t, root, append([]string{"add", "-f", "--"}, force...)...)
	}
	git(t, root, "commit", "-q", "--allow-empty", "-m", "seed")
}

// seed writes the files every verify test starts from.
func seed(t *testing.T, root string) {
	t.Helper()
	writeFile(t, root, "a.txt", "alpha\n")
	writeFile(t, root, "b/c.go", "package b\n")
	writeFile(t, root, "run.sh", "echo run\n")
	writeFile(t, root, "gone.txt", "soon gone\n")
	writeFile(t, root, ".gitignore", "cache/\n*.log\n")
}

// verifyRun runs one iteration of task "a" with Verify on: the working
// agent writes work.go, the verifier runs act on the tree (after reading
// it into before) and then says pass. It returns the report, the tree as
// the verifier found it and as the run left it, and the notices.
type verifyRun struct {
	rep     loop.Report
	err     error
	before  map[string]fileState // the tree the verifier was given
	during  map[string]fileState // the tree as the verifier left it
	after   map[string]fileState
	notices []string
}

func runVerify(t *testing.T, ctx context.Context, cfg loop.Config, store *looptest.MemStore, act func(root string), result loop.RunResult, runErr error) verifyRun {
	t.Helper()
	var v verifyRun
	index := filepath.Join(cfg.Root, ".git", "index")
	indexBefore, _ := os.ReadFile(index)
	var mu sync.Mutex
	cfg.Verify = true
	cfg.MaxIterations = 1
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		if n.Kind == loop.NoteNotice {
			mu.Lock()
			v.notices = append(v.notices, n.Message)
			mu.Unlock()
		}
	})
	runner := looptest.NewFakeRunner(t).ThenFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		writeFile(t, cfg.Root, "work.go", "package work\n")
		return looptest.Result(done("a")), nil
	}).ThenFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		if !isVerifier(req) || req.Dir != cfg.Root {
			t.Errorf("second session: tools %v in %s, want the verifier in %s", req.Tools, req.Dir, cfg.Root)
		}
		v.before = readTree(t, cfg.Root)
		act(cfg.Root)
		v.during = readTree(t, cfg.Root)
		return result, runErr
	})
	v.rep, v.err = loop.Run(ctx, cfg, store, runner)
	v.after = readTree(t, cfg.Root)
	if indexAfter, _ := os.ReadFile(index); string(indexAfter) != string(indexBefore) {
		t.Errorf("the project's git index changed")
	}
	if len(indexBefore) > 0 {
		cmd := exec.Command("git", "status", "--porcelain", "-uall")
		cmd.Dir = cfg.Root
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "GIT_DIR=") || strings.HasPrefix(kv, "GIT_INDEX_FILE=")
		})
		st, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(st), "verify-snapshot") {
			t.Errorf("git status: %v; the project's git must not see the snapshot store:\n%s", err, st)
		}
	}
	noneInProgress(t, store)
	return v
}

// verifyLogs returns the messages of the task's verify log entries.
func verifyLogs(t *testing.T, store *looptest.MemStore, id string) []string {
	t.Helper()
	logs, err := store.Logs(t.Context(), id)
	must(t, err)
	var msgs []string
	for _, l := range logs {
		if l.Kind == loop.LogVerify {
			msgs = append(msgs, l.Message)
		}
	}
	return msgs
}

func TestVerifierWritesDoNotSurvive(t *testing.T) {
	tests := []struct {
		name string
		// sub makes the project root a directory below the repository's top.
		sub   bool
		setup func(t *testing.T, root string) // the project; seed files are there already
		act   func(t *testing.T, root string) // what the verifier does
		// kept are the paths (and everything under them) whose state the
		// verifier left must survive: ignored paths, ralph's logs (the
		// rest of .ralph is the repository guard's, which restores and
		// counts it: TestVerifierGitStateAndRalphFilesAreUndone).
		kept []string
		// changed are the paths the verify log entry names.
		changed []string
	}{
		{
			name:  "modify, add, delete, chmod and an ignored write in a git repository",
			setup: func(t *testing.T, root string) { commitAll(t, root) },
			act: func(t *testing.T, root string) {
				writeFile(t, root, "a.txt", "tampered\n")
				writeFile(t, root, "notes.md", "scratch\n")
				writeFile(t, root, "new/deep/x.txt", "x\n")
				must(t, os.Remove(filepath.Join(root, "gone.txt")))
				must(t, os.Chmod(filepath.Join(root, "run.sh"), 0o755))
				writeFile(t, root, "work.go", "package work // fixed\n")
				writeFile(t, root, "cache/out.bin", "build output")
				writeFile(t, root, "test.log", "PASS\n")
			},
			kept:    []string{"cache", "test.log"},
			changed: []string{"a.txt", "gone.txt", "new/deep/x.txt", "notes.md", "run.sh", "work.go"},
		},
		{
			name: "a project that is no git repository",
			act: func(t *testing.T, root string) {
				writeFile(t, root, "b/c.go", "package c\n")
				writeFile(t, root, "b/d.go", "package b\n")
				must(t, os.Remove(filepath.Join(root, "a.txt")))
				writeFile(t, root, "cache/out.bin", "build output")
			},
			kept:    []string{"cache"},
			changed: []string{"a.txt", "b/c.go", "b/d.go"},
		},
		{
			name: "a project whose .gitignore lists .ralph/",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, ".gitignore", ".ralph/\ncache/\n")
				writeFile(t, root, ".ralph/logs/notes", "mine\n")
				commitAll(t, root)
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, ".ralph/logs/notes", "the verifier's\n")
				writeFile(t, root, ".ralph/logs/scratch/x", "x")
				writeFile(t, root, "b/c.go", "package c\n")
			},
			kept:    []string{".ralph/logs"},
			changed: []string{"b/c.go"},
		},
		{
			name: ".ralph/logs is never restored or counted, even when git would see it",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, ".ralph/logs/notes", "mine\n")
				commitAll(t, root)
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, ".ralph/logs/scratch/x", "x")
				must(t, os.Remove(filepath.Join(root, ".ralph", "logs", "notes")))
				writeFile(t, root, "a.txt", "tampered\n")
			},
			kept:    []string{".ralph/logs"},
			changed: []string{"a.txt"},
		},
		{
			name: ".ralph/logs in a project that is no git repository",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, ".ralph/logs/notes", "mine\n")
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, ".ralph/logs/notes", "the verifier's\n")
				writeFile(t, root, ".ralph/logs/new", "x")
				writeFile(t, root, "a.txt", "tampered\n")
			},
			kept:    []string{".ralph/logs"},
			changed: []string{"a.txt"},
		},
		{
			name: "names with spaces and newlines, symlinks",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "with space.txt", "s\n")
				writeFile(t, root, "new\nline.txt", "n\n")
				must(t, os.Symlink("a.txt", filepath.Join(root, "link")))
				commitAll(t, root)
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, "with space.txt", "S\n")
				must(t, os.Remove(filepath.Join(root, "new\nline.txt")))
				writeFile(t, root, "tab\tand\nnewline.txt", "t\n")
				must(t, os.Remove(filepath.Join(root, "link")))
				must(t, os.Symlink("b/c.go", filepath.Join(root, "link")))
				must(t, os.Symlink("/etc/passwd", filepath.Join(root, "new link")))
			},
			changed: []string{"link", "new\nline.txt", "new link", "tab\tand\nnewline.txt", "with space.txt"},
		},
		{
			name: "a file replaced by a directory, a directory by a file, a file by a symlink",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "d/e/f.txt", "f\n")
				commitAll(t, root)
			},
			act: func(t *testing.T, root string) {
				must(t, os.Remove(filepath.Join(root, "a.txt")))
				writeFile(t, root, "a.txt/inner", "i\n")
				must(t, os.RemoveAll(filepath.Join(root, "d")))
				writeFile(t, root, "d", "now a file\n")
				must(t, os.Remove(filepath.Join(root, "run.sh")))
				must(t, os.Symlink("a.txt", filepath.Join(root, "run.sh")))
			},
			changed: []string{"a.txt", "a.txt/inner", "d", "d/e/f.txt", "run.sh"},
		},
		{
			name: "a tracked file that .gitignore matches is protected",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "settings.log", "level=info\n")
				commitAll(t, root, "settings.log")
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, "settings.log", "level=debug\n")
				writeFile(t, root, "other.log", "x\n")
			},
			kept:    []string{"other.log"},
			changed: []string{"settings.log"},
		},
		{
			name: "GIT_DIR and GIT_INDEX_FILE in ralph's environment mislead nothing",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "settings.log", "level=info\n")
				commitAll(t, root, "settings.log")
				t.Setenv("GIT_DIR", filepath.Join(t.TempDir(), "elsewhere.git"))
				t.Setenv("GIT_INDEX_FILE", filepath.Join(t.TempDir(), "index"))
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, "settings.log", "level=debug\n")
			},
			changed: []string{"settings.log"},
		},
		{
			name: "files hidden by an edit to .gitignore go too",
			setup: func(t *testing.T, root string) {
				commitAll(t, root)
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, ".gitignore", "cache/\n*.log\n*.md\n")
				writeFile(t, root, "hidden.md", "h\n")
			},
			changed: []string{".gitignore", "hidden.md"},
		},
		{
			name: "files come back byte for byte whatever .gitattributes asks",
			setup: func(t *testing.T, root string) {
				global := filepath.Join(t.TempDir(), "gitconfig")
				writeFile(t, filepath.Dir(global), "gitconfig", "[filter \"shout\"]\n\tclean = tr a-z A-Z\n\tsmudge = cat\n")
				t.Setenv("GIT_CONFIG_GLOBAL", global)
				writeFile(t, root, ".gitattributes", "* text eol=crlf\n*.md filter=shout\n")
				writeFile(t, root, "lf.txt", "a\nb\n")
				writeFile(t, root, "crlf.txt", "a\r\nb\r\n")
				writeFile(t, root, "quiet.md", "quiet\n")
				commitAll(t, root)
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, "lf.txt", "x\n")
				writeFile(t, root, "crlf.txt", "x\n")
				writeFile(t, root, "quiet.md", "x\n")
			},
			changed: []string{"crlf.txt", "lf.txt", "quiet.md"},
		},
		{
			name: "the project's .git/info/exclude is honoured",
			setup: func(t *testing.T, root string) {
				commitAll(t, root)
				writeFile(t, root, ".git/info/exclude", "scratch/\n")
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, "scratch/x", "x")
				writeFile(t, root, "b/c.go", "package c\n")
			},
			kept:    []string{"scratch"},
			changed: []string{"b/c.go"},
		},
		{
			name: "a project below its repository's top: the top's ignore rules hold",
			sub:  true,
			setup: func(t *testing.T, root string) {
				writeFile(t, filepath.Dir(root), ".gitignore", "*.tmp\n")
				writeFile(t, filepath.Dir(root), "outside.txt", "not the project's\n")
				commitAll(t, filepath.Dir(root))
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, "x.tmp", "ignored by the top's .gitignore")
				writeFile(t, root, "b/c.go", "package c\n")
			},
			kept:    []string{"x.tmp"},
			changed: []string{"b/c.go"},
		},
		{
			name: "nested repositories and submodules are protected",
			setup: func(t *testing.T, root string) {
				lib := filepath.Join(root, "vendor", "lib")
				must(t, os.MkdirAll(lib, 0o755))
				writeFile(t, lib, "lib.go", "package lib\n")
				writeFile(t, lib, ".gitignore", "*.o\n")
				commitAll(t, lib) // an untracked nested repository
				up := filepath.Join(t.TempDir(), "up")
				must(t, os.MkdirAll(up, 0o755))
				writeFile(t, up, "up.go", "package up\n")
				commitAll(t, up)
				commitAll(t, root)
				git(t, root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", up, "sub")
				git(t, root, "commit", "-q", "-m", "submodule")
			},
			act: func(t *testing.T, root string) {
				writeFile(t, root, "vendor/lib/lib.go", "package lib // changed\n")
				writeFile(t, root, "vendor/lib/extra.go", "package lib\n")
				writeFile(t, root, "vendor/lib/lib.o", "object")
				writeFile(t, root, "sub/up.go", "package up // changed\n")
			},
			kept:    []string{"vendor/lib/lib.o"},
			changed: []string{"sub/up.go", "vendor/lib/extra.go", "vendor/lib/lib.go"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			cfg.MaxRetries = 1
			if tt.sub {
				cfg.Root = filepath.Join(t.TempDir(), "proj")
			}
			seed(t, cfg.Root)
			if tt.setup != nil {
				tt.setup(t, cfg.Root)
			}
			v := runVerify(t, t.Context(), cfg, store, func(root string) { tt.act(t, root) }, looptest.Result("Looks right. <verify-pass/>"), nil)
			if v.err != nil {
				t.Fatalf("Run: %v (%s)", v.err, v.rep.Message)
			}
			if v.before["work.go"].Content != "package work\n" {
				t.Errorf("the verifier was not given the working agent's tree: work.go is %+v", v.before["work.go"])
			}

			// The tree is as the verifier found it, but for the kept paths.
			want := map[string]fileState{}
			isKept := func(p string) bool {
				return slices.ContainsFunc(tt.kept, func(k string) bool { return p == k || strings.HasPrefix(p, k+"/") })
			}
			for p, s := range v.before {
				if !isKept(p) {
					want[p] = s
				}
			}
			for p, s := range v.during {
				if isKept(p) {
					want[p] = s
				}
			}
			if diff := cmp.Diff(want, v.after); diff != "" {
				t.Errorf("tree after verification (-want +got):\n%s", diff)
			}

			task, err := store.Get(t.Context(), "a")
			must(t, err)
			logs := verifyLogs(t, store, "a")
			var names []string
			for _, p := range tt.changed {
				if strings.ContainsAny(p, "\n\t") {
					p = strconv.Quote(p)
				}
				names = append(names, p)
			}
			msg := "the verifier changed files (restored): " + strings.Join(names, ", ")
			if diff := cmp.Diff([]string{msg}, logs); diff != "" {
				t.Errorf("verify log entries (-want +got):\n%s", diff)
			}
			if task.Status != loop.StatusPending || task.RetryCount != 1 || task.VerificationStatus != "fail" {
				t.Errorf("task %s, retries %d, verification %q; want pending, 1, fail (the pass does not count)", task.Status, task.RetryCount, task.VerificationStatus)
			}
			all, _ := store.Logs(t.Context(), "a")
			if last := all[len(all)-1]; last.Kind != loop.LogRetry || last.Message != "verification failed: "+msg {
				t.Errorf("last log entry %s %q; want the retry with the reason", last.Kind, last.Message)
			}
			if !slices.ContainsFunc(v.notices, func(n string) bool { return strings.HasPrefix(n, msg) }) {
				t.Errorf("notices %q lack %q", v.notices, msg)
			}
			if r := v.rep.Receipts[len(v.rep.Receipts)-1]; r.Mode != "verify" || r.Verdict != "fail" {
				t.Errorf("verifier receipt %s verdict %q; want verify, fail", r.Mode, r.Verdict)
			}
		})
	}
}

func TestVerifierChangesAreRestoredWhateverTheSessionsEnd(t *testing.T) {
	tests := []struct {
		name   string
		result loop.RunResult
		err    error // the Runner's error
		config func(*loop.Config)
		want   loop.Outcome
	}{
		{name: "crash", result: looptest.ErrorResult(loop.ClassCrashed, "segfault"), want: loop.OutcomeLimitReached},
		{name: "timeout", result: looptest.ErrorResult(loop.ClassTimeout, ""), want: loop.OutcomeLimitReached},
		{name: "usage limit", result: looptest.UsageLimited(time.Now().Add(time.Hour)), want: loop.OutcomeUsageLimit,
			config: func(c *loop.Config) { c.OnUsageLimit = loop.UsageLimitStop }},
		{name: "cancellation", result: looptest.Cancelled(), want: loop.OutcomeCancelled},
		{name: "runner error", err: errDisk, want: loop.OutcomeError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			cfg.MaxRetries = 1
			seed(t, cfg.Root)
			commitAll(t, cfg.Root)
			if tt.config != nil {
				tt.config(&cfg)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			v := runVerify(t, ctx, cfg, store, func(root string) {
				writeFile(t, root, "a.txt", "tampered\n")
				if tt.result.Class == loop.ClassCancelled {
					cancel()
				}
			}, tt.result, tt.err)
			if v.rep.Outcome != tt.want {
				t.Errorf("outcome %s (%s), want %s", v.rep.Outcome, v.rep.Message, tt.want)
			}
			if diff := cmp.Diff(v.before, v.after); diff != "" {
				t.Errorf("tree after verification (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"the verifier changed files (restored): a.txt"}, verifyLogs(t, store, "a")); diff != "" {
				t.Errorf("verify log entries (-want +got):\n%s", diff)
			}
			if task, _ := store.Get(t.Context(), "a"); task.RetryCount != 0 {
				t.Errorf("retries %d; want 0 (the session's trouble is not the task's)", task.RetryCount)
			}
		})
	}
}

func TestVerifyNeedsGit(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.Verify = true
	t.Setenv("PATH", t.TempDir())
	runner := looptest.NewFakeRunner(nil)
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if !errors.Is(err, loop.ErrVerifyNeedsGit) || !errors.Is(err, loop.ErrConfig) {
		t.Errorf("err = %v, want ErrVerifyNeedsGit", err)
	}
	if rep.Outcome != loop.OutcomeError || rep.ExitCode() != 1 || !strings.Contains(rep.Message, "verify needs git") {
		t.Errorf("outcome %s exit %d (%s); want error, 1", rep.Outcome, rep.ExitCode(), rep.Message)
	}
	logs, _ := store.Logs(t.Context(), "a")
	if runner.Calls() != 0 || len(logs) != 0 || statuses(t, store)["a"] != loop.StatusPending {
		t.Errorf("%d sessions, logs %v, status %s; want nothing claimed or run", runner.Calls(), logs, statuses(t, store)["a"])
	}
}

// A tree that cannot be put back stops the run, naming the paths.
func TestVerifierRestoreFailureStops(t *testing.T) {
	store := newStore(t, tasks("a", "b")...)
	cfg := testConfig(t)
	seed(t, cfg.Root)
	writeFile(t, cfg.Root, "flag", "1") // one byte: stored as a loose object
	commitAll(t, cfg.Root)
	v := runVerify(t, t.Context(), cfg, store, func(root string) {
		// The verifier wrecks the snapshot store too: the blob flag is to
		// be restored from is gone.
		id := strings.TrimSpace(git(t, root, "hash-object", "--no-filters", "flag"))
		must(t, os.Remove(filepath.Join(root, ".ralph", "verify-snapshot.git", "objects", id[:2], id[2:])))
		writeFile(t, root, "flag", "0")
	}, looptest.Result("<verify-pass/>"), nil)
	if !errors.Is(v.err, loop.ErrVerifyRestore) || v.rep.Outcome != loop.OutcomeError || v.rep.ExitCode() != 1 {
		t.Fatalf("outcome %s, err %v; want an internal error wrapping ErrVerifyRestore", v.rep.Outcome, v.err)
	}
	if !strings.Contains(v.rep.Message, "(flag)") {
		t.Errorf("message %q does not name flag", v.rep.Message)
	}
	if diff := cmp.Diff([]string{"the verifier changed files: flag"}, verifyLogs(t, store, "a")); diff != "" {
		t.Errorf("verify log entries (-want +got):\n%s", diff)
	}
	if got := statuses(t, store); got["a"] != loop.StatusPending || got["b"] != loop.StatusPending {
		t.Errorf("statuses %v; want a released and b untouched", got)
	}
}

// A verifier that changes nothing (ignored paths aside) has its pass
// counted and nothing logged, also right after a verification whose
// changes were undone: the restored tree is not mistaken for a changed one.
func TestVerifierThatChangesNothingPasses(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.Verify, cfg.MaxRetries = true, 1
	seed(t, cfg.Root)
	commitAll(t, cfg.Root)
	var before, during map[string]fileState
	runner := looptest.NewFakeRunner(t).ThenFunc(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		writeFile(t, cfg.Root, "work.go", "package work\n")
		return looptest.Result(done("a")), nil
	}).ThenFunc(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		writeFile(t, cfg.Root, "a.txt", "tampered\n")
		return looptest.Result("<verify-pass/>"), nil
	}).ThenFunc(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		writeFile(t, cfg.Root, "work.go", "package work // v2\n")
		return looptest.Result(done("a")), nil
	}).ThenFunc(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		before = readTree(t, cfg.Root)
		_, err := os.ReadFile(filepath.Join(cfg.Root, "a.txt"))
		must(t, err)
		writeFile(t, cfg.Root, "cache/go-build/x", "cached")
		writeFile(t, cfg.Root, "b/test.log", "ok\n")
		during = readTree(t, cfg.Root)
		return looptest.Result("<verify-pass/>"), nil
	})
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete || rep.Iterations != 2 {
		t.Errorf("outcome %s after %d iterations (%s); want complete after 2", rep.Outcome, rep.Iterations, rep.Message)
	}
	if diff := cmp.Diff(during, readTree(t, cfg.Root)); diff != "" {
		t.Errorf("tree after the second verification (-want +got):\n%s", diff)
	}
	if during["a.txt"] != before["a.txt"] || before["a.txt"].Content != "alpha\n" {
		t.Errorf("a.txt %+v before the second verification; want it restored", before["a.txt"])
	}
	want := []string{"the verifier changed files (restored): a.txt"}
	if diff := cmp.Diff(want, verifyLogs(t, store, "a")); diff != "" {
		t.Errorf("verify log entries (-want +got):\n%s", diff)
	}
	var verdicts []string
	for _, r := range rep.Receipts {
		if r.Mode == "verify" {
			verdicts = append(verdicts, r.Verdict)
		}
	}
	if diff := cmp.Diff([]string{"fail", "pass"}, verdicts); diff != "" {
		t.Errorf("verifier receipts (-want +got):\n%s", diff)
	}
}

// The snapshot store lives in the tree, where a verifier can damage it;
// the next verification rebuilds it before its session, and still
// protects the tree.
func TestVerifierSnapshotStoreIsRebuilt(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxRetries = 1
	seed(t, cfg.Root)
	commitAll(t, cfg.Root)
	first := runVerify(t, t.Context(), cfg, newStore(t, tasks("a")...), func(string) {}, looptest.Result("<verify-pass/>"), nil)
	if first.err != nil || first.rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("first run: %s, %v", first.rep.Outcome, first.err)
	}
	objects := filepath.Join(cfg.Root, ".ralph", "verify-snapshot.git", "objects")
	dirs, err := os.ReadDir(objects)
	must(t, err)
	for _, d := range dirs {
		must(t, os.RemoveAll(filepath.Join(objects, d.Name())))
	}

	store := newStore(t, tasks("a")...)
	v := runVerify(t, t.Context(), cfg, store, func(root string) {
		writeFile(t, root, "b/c.go", "package c\n")
	}, looptest.Result("<verify-pass/>"), nil)
	if v.err != nil {
		t.Fatalf("second run: %v (%s)", v.err, v.rep.Message)
	}
	if diff := cmp.Diff(v.before, v.after); diff != "" {
		t.Errorf("tree after verification (-want +got):\n%s", diff)
	}
	if !slices.ContainsFunc(v.notices, func(n string) bool { return strings.HasPrefix(n, "rebuilding the verifier's snapshot store") }) {
		t.Errorf("notices %q say nothing of the rebuild", v.notices)
	}
	if diff := cmp.Diff([]string{"the verifier changed files (restored): b/c.go"}, verifyLogs(t, store, "a")); diff != "" {
		t.Errorf("verify log entries (-want +got):\n%s", diff)
	}
}
