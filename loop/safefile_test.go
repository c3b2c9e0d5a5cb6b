package loop_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
	"github.com/ralph-dev/ralph/safefile"
)

// logDir is the default log directory of cfg.
func logDir(cfg loop.Config) string { return filepath.Join(cfg.Root, ".ralph", "logs") }

// secretFile is a file outside the project, the stand-in for ~/.bashrc or
// ~/.ssh/id_rsa.
func secretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "id_rsa")
	if err := os.WriteFile(p, []byte("-----BEGIN KEY-----\ndescription: the secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func wantRefused(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, safefile.ErrLink) || !strings.Contains(err.Error(), path) {
		t.Errorf("error = %v, want a refused link naming %s", err, path)
	}
	if err != nil && strings.Contains(err.Error(), "the secret") {
		t.Errorf("the secret is in the error: %v", err)
	}
}

// Files the loop reads into a prompt are read without following a link:
// each one linked to a secret is an error naming it.
func TestPromptInputsRefuseLinks(t *testing.T) {
	t.Run("prompt override", func(t *testing.T) {
		root, secret := t.TempDir(), secretFile(t)
		link := filepath.Join(root, ".ralph", "prompts", "build.md")
		symlink(t, secret, link)
		_, err := loop.LoadPrompt(root, "build")
		wantRefused(t, err, link)
		if !errors.Is(err, loop.ErrPrompt) {
			t.Errorf("error %v is not a prompt error", err)
		}
	})
	t.Run("prompts directory", func(t *testing.T) {
		root, secret := t.TempDir(), secretFile(t)
		link := filepath.Join(root, ".ralph", "prompts")
		symlink(t, filepath.Dir(secret), link)
		os.Rename(secret, filepath.Join(filepath.Dir(secret), "build.md"))
		_, err := loop.LoadPrompt(root, "build")
		wantRefused(t, err, link)
	})
	t.Run("prompt override linked inside the project", func(t *testing.T) {
		root := t.TempDir()
		writeFile(t, root, ".ralph/db.json", `{"url":"postgres://u:the secret@h/db"}`)
		link := filepath.Join(root, ".ralph", "prompts", "build.md")
		symlink(t, "../db.json", link)
		_, err := loop.LoadPrompt(root, "build")
		wantRefused(t, err, link)
	})
	t.Run("skill", func(t *testing.T) {
		root, secret := t.TempDir(), secretFile(t)
		writeFile(t, root, ".ralph/skills/ok/SKILL.md", "---\ndescription: fine\n---\n")
		link := filepath.Join(root, ".ralph", "skills", "evil", "SKILL.md")
		symlink(t, secret, link)
		_, err := loop.FindSkills(root)
		wantRefused(t, err, link)
	})
	t.Run("skill directory", func(t *testing.T) {
		root, secret := t.TempDir(), secretFile(t)
		os.Rename(secret, filepath.Join(filepath.Dir(secret), "SKILL.md"))
		link := filepath.Join(root, ".ralph", "skills", "evil")
		symlink(t, filepath.Dir(secret), link)
		_, err := loop.FindSkills(root)
		wantRefused(t, err, link)
	})
	t.Run("spec", func(t *testing.T) {
		root, secret := t.TempDir(), secretFile(t)
		writeFile(t, root, "specs/a.md", "# A\n")
		link := filepath.Join(root, "specs", "b.md")
		symlink(t, secret, link)
		_, err := loop.ReadSpecs(root)
		wantRefused(t, err, link)
	})
	t.Run("specs directory", func(t *testing.T) {
		root, secret := t.TempDir(), secretFile(t)
		os.Rename(secret, filepath.Join(filepath.Dir(secret), "a.md"))
		link := filepath.Join(root, "specs")
		symlink(t, filepath.Dir(secret), link)
		_, err := loop.ReadSpecs(root)
		wantRefused(t, err, link)
	})
	t.Run("no links: read as before", func(t *testing.T) {
		root := t.TempDir()
		writeFile(t, root, "specs/a.md", "# A\n")
		writeFile(t, root, "specs/blank.md", "  \n")
		if err := os.MkdirAll(filepath.Join(root, "specs", "dir.md"), 0o755); err != nil {
			t.Fatal(err)
		}
		specs, err := loop.ReadSpecs(root)
		if err != nil || len(specs) != 1 || specs[0].Path != "specs/a.md" {
			t.Errorf("ReadSpecs = %+v, %v", specs, err)
		}
	})
}

// A raw stream the runner refused (a link planted at it) is a notice that
// says so; the session counts as it is.
func TestRawLogRefusedIsSaid(t *testing.T) {
	cfg := testConfig(t)
	cfg.RawLogs = true
	cfg.MaxIterations = 1
	rec := &recorder{}
	cfg.Observer = rec
	var req0 loop.RunRequest
	runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		req0 = req
		res := looptest.Result(done(envOf(req, "RALPH_TASK_ID")))
		res.LogErr = &safefile.LinkError{Op: "append", Path: req.LogPath, Why: "is a symbolic link"}
		return res, nil
	})
	store := newStore(t, tasks("a")...)
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	if req0.LogRoot != cfg.Root {
		t.Errorf("LogRoot = %q, want the project root %q", req0.LogRoot, cfg.Root)
	}
	if got := statuses(t, store)["a"]; got != loop.StatusDone {
		t.Errorf("task a is %s, want done", got)
	}
	want := "the raw stream log was not written: refused a link: " + req0.LogPath + " is a symbolic link"
	var notices []string
	for _, n := range rec.kind(loop.NoteNotice) {
		notices = append(notices, n.Message)
	}
	if !strings.Contains(strings.Join(notices, "\n"), want) {
		t.Errorf("notices %q, want one saying %q", notices, want)
	}
}

// The session log and the event log are not written through a link.
func TestLogsRefuseLinks(t *testing.T) {
	t.Run("event log is a link: a notice, the run goes on", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.SessionLog, cfg.RawLogs = true, true
		cfg.MaxIterations = 1
		rec := &recorder{}
		cfg.Observer = rec
		secret := secretFile(t)
		link := loop.EventLogPath(logDir(cfg), cfg.Session)
		symlink(t, secret, link)
		runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
			return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
		})
		store := newStore(t, tasks("a")...)
		if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(secret); !strings.HasPrefix(string(b), "-----BEGIN KEY-----\ndescription: the secret\n") || len(b) != len("-----BEGIN KEY-----\ndescription: the secret\n") {
			t.Errorf("the file outside changed: %q", b)
		}
		var found bool
		for _, n := range rec.kind(loop.NoteNotice) {
			found = found || strings.Contains(n.Message, "refused a link: "+link)
		}
		if !found {
			t.Errorf("no notice names the refused event log %s", link)
		}
		if got := statuses(t, store)["a"]; got != loop.StatusDone {
			t.Errorf("task a is %s, want done", got)
		}
	})
	t.Run("session log named by the caller is a link: replaced, not followed", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.SessionLog = true
		cfg.MaxIterations = 1
		secret := secretFile(t)
		link := loop.SessionLogPath(logDir(cfg), cfg.Session)
		symlink(t, secret, link)
		runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
			return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
		})
		if _, err := loop.Run(t.Context(), cfg, newStore(t, tasks("a")...), runner); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(secret); string(b) != "-----BEGIN KEY-----\ndescription: the secret\n" {
			t.Errorf("the file outside changed: %q", b)
		}
		if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("the session log is not a file of its own: %v %v", fi, err)
		}
	})
	t.Run(".ralph/logs is a link: the run does not start", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.SessionLog, cfg.RawLogs = true, true
		cfg.Session = ""
		elsewhere := t.TempDir()
		symlink(t, elsewhere, logDir(cfg))
		runner := looptest.NewFakeRunner(t)
		_, err := loop.Run(t.Context(), cfg, newStore(t, tasks("a")...), runner)
		wantRefused(t, err, logDir(cfg))
		if entries, _ := os.ReadDir(elsewhere); len(entries) > 0 {
			t.Errorf("files written through the link: %v", entries)
		}
	})
	t.Run("clock-made name whose log is a link: the next name", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.SessionLog = true
		cfg.Session = ""
		cfg.MaxIterations = 1
		secret := secretFile(t)
		now := time.Now()
		cfg.Now = func() time.Time { return now }
		name := loop.SessionName(now)
		symlink(t, secret, loop.SessionLogPath(logDir(cfg), name))
		runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
			return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
		})
		rep, err := loop.Run(t.Context(), cfg, newStore(t, tasks("a")...), runner)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Session == name {
			t.Errorf("the session took the linked name %s", name)
		}
		if b, _ := os.ReadFile(secret); string(b) != "-----BEGIN KEY-----\ndescription: the secret\n" {
			t.Errorf("the file outside changed: %q", b)
		}
	})
}

// A LogDir outside the project is trusted as named (made if missing) and
// is the runner's LogRoot.
func TestLogDirOutsideRoot(t *testing.T) {
	cfg := testConfig(t)
	cfg.RawLogs = true
	cfg.MaxIterations = 1
	cfg.LogDir = filepath.Join(t.TempDir(), "elsewhere", "logs")
	var got loop.RunRequest
	runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		got = req
		return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
	})
	if _, err := loop.Run(t.Context(), cfg, newStore(t, tasks("a")...), runner); err != nil {
		t.Fatal(err)
	}
	if got.LogRoot != cfg.LogDir || !strings.HasPrefix(got.LogPath, cfg.LogDir) {
		t.Errorf("LogRoot %q, LogPath %q; want both at %s", got.LogRoot, got.LogPath, cfg.LogDir)
	}
	if fi, err := os.Stat(filepath.Join(cfg.LogDir, cfg.Session)); err != nil || !fi.IsDir() {
		t.Errorf("the raw-log directory was not made: %v", err)
	}
}
