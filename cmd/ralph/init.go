package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
)

//go:embed assets/ralph-build.md
var ralphBuildCommand []byte

// projectDirs are created under .ralph/ by init.
var projectDirs = []string{"prompts", "skills", "logs", "features"}

func initCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "set up ralph in the project: .ralph/ with its database, and the Claude Code integration",
		Description: "Creates .ralph/ (progress.db, prompts/, skills/, logs/, features/), the /ralph-build\n" +
			"slash command in .claude/commands/ and a SessionEnd hook in .claude/settings.json that\n" +
			"releases a ralph agent's claims when its session ends after the ralph loop that ran it\n" +
			"is gone ('ralph hook session-end'). Existing files are kept; the hook is merged into\n" +
			"existing settings, and an earlier ralph's hook is replaced in place. Running init again\n" +
			"changes nothing.\n\n" +
			"With --db URL (PostgreSQL) the plan is made on that server instead of progress.db, as\n" +
			"--plan NAME (default the directory's name) with the repository's root commit, and the\n" +
			"URL without its password and the plan's name are remembered in .ralph/db.json.",
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			p, err := projectRoot(c)
			if err != nil {
				return err
			}
			return initProject(c, cfg, p)
		},
	}
}

// initProject plans every change first — so that a settings file it cannot
// merge stops it before anything is created — then makes them, printing one
// line for each.
func initProject(c *cli.Context, cfg appConfig, p project) error {
	if fi, err := os.Stat(p.root); err != nil {
		return fmt.Errorf("project root: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("project root %s is not a directory", p.root)
	}
	settingsPath := filepath.Join(p.root, ".claude", "settings.json")
	settings, hook, err := mergedSettings(settingsPath)
	if err != nil {
		return err
	}
	d, err := resolveDB(c, p)
	if err != nil {
		return err
	}
	dbExists, err := openExistingPlan(c, cfg, p, d)
	if err != nil {
		return err
	}
	created, err := makeProjectDirs(c, cfg, p, dbExists)
	if err != nil {
		return err
	}
	if d.server() {
		changed, err := rememberDB(p, d)
		if err != nil {
			return err
		}
		if changed {
			created = append(created, fmt.Sprintf("plan %s on %s (remembered in %s)", d.plan, postgres.Redact(d.url), p.rel(p.dbFilePath())))
		}
	}
	more, err := installClaudeFiles(p, settingsPath, settings, hook)
	if err != nil {
		return err
	}
	created = append(created, more...)
	if len(created) == 0 {
		_, err := fmt.Fprintf(cfg.stdout, "ralph is already set up in %s\n", p.root)
		return err
	}
	for _, line := range created {
		if _, err := fmt.Fprintln(cfg.stdout, line); err != nil {
			return err
		}
	}
	return nil
}

// openExistingPlan opens (and migrates) the plan that exists already,
// before anything is created, so that one which is corrupt, foreign or
// newer than this ralph stops init with nothing changed: on a server,
// the plan is made (or found, and checked to be this repository's)
// there. It reports whether the project has a plan now (a plan on a
// server needs no SQLite file).
func openExistingPlan(c *cli.Context, cfg appConfig, p project, d dbTarget) (bool, error) {
	if d.server() {
		st, err := openServerStore(c, cfg, p, d, true)
		if err != nil {
			return false, err
		}
		return true, st.Close()
	}
	if !fileExists(p.dbPath()) {
		return false, nil
	}
	return true, openAndClose(c, cfg, p.dbPath())
}

// makeProjectDirs makes .ralph/ and its directories, and the SQLite
// database unless dbExists, and says what it created.
func makeProjectDirs(c *cli.Context, cfg appConfig, p project, dbExists bool) ([]string, error) {
	var created []string
	for _, d := range append([]string{""}, projectDirs...) {
		dir := filepath.Join(p.ralph, d)
		if fileExists(dir) {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		created = append(created, "created "+p.rel(dir)+"/")
	}
	if !dbExists {
		if err := openAndClose(c, cfg, p.dbPath()); err != nil {
			return nil, err
		}
		created = append(created, "created "+p.rel(p.dbPath()))
	}
	return created, nil
}

// installClaudeFiles writes the /ralph-build slash command, if missing,
// and settings (ralph's SessionEnd hook merged in, nil: there already)
// to settingsPath, and says what it did.
func installClaudeFiles(p project, settingsPath string, settings []byte, hook hookChange) ([]string, error) {
	var created []string
	cmdPath := filepath.Join(p.root, ".claude", "commands", "ralph-build.md")
	if !fileExists(cmdPath) {
		if err := writeFileAtomic(cmdPath, ralphBuildCommand, 0o644); err != nil {
			return nil, err
		}
		created = append(created, "created "+p.rel(cmdPath))
	}
	if settings == nil {
		return created, nil
	}
	what := "created " + p.rel(settingsPath) + " (SessionEnd hook)"
	switch {
	case hook == hookReplaced:
		what = "replaced an earlier ralph's SessionEnd hook in " + p.rel(settingsPath)
	case fileExists(settingsPath):
		what = "added the SessionEnd hook to " + p.rel(settingsPath)
	}
	if err := writeFileAtomic(settingsPath, settings, 0o644); err != nil {
		return nil, err
	}
	return append(created, what), nil
}

// mergedSettings returns the content .claude/settings.json should have with
// ralph's SessionEnd hook, and what changes; nil when the file has it
// already.
func mergedSettings(path string) ([]byte, hookChange, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		data = nil
	} else if err != nil {
		return nil, hookKept, err
	}
	out, change, err := addSessionEndHook(data, sessionEndHook)
	if err != nil {
		return nil, hookKept, fmt.Errorf("cannot add ralph's hook to %s: %w (fix or move the file, then run 'ralph init' again)", path, err)
	}
	return out, change, nil
}

func openAndClose(c *cli.Context, cfg appConfig, path string) error {
	st, err := dag.Open(c.Context, path, cfg.storeOptions())
	if err != nil {
		return err
	}
	return st.Close()
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, creating the parent directory, keeping an existing file's mode.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, mode)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return werr
	}
	return nil
}
