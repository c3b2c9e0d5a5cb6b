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
)

//go:embed assets/ralph-build.md
var ralphBuildCommand []byte

// sessionEndHook is the command of the SessionEnd hook ralph installs: when
// a Claude Code session started by a ralph run ends, the claims of its agent
// go back to pending at once instead of waiting for their leases to expire.
// Outside a ralph run RALPH_AGENT_ID is unset and it does nothing.
const sessionEndHook = `[ -n "$RALPH_AGENT_ID" ] && "${RALPH_BIN:-ralph}" task release --agent "$RALPH_AGENT_ID" || true`

// projectDirs are created under .ralph/ by init.
var projectDirs = []string{"prompts", "skills", "logs", "features"}

func initCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "set up ralph in the project: .ralph/ with its database, and the Claude Code integration",
		Description: "Creates .ralph/ (progress.db, prompts/, skills/, logs/, features/), the /ralph-build\n" +
			"slash command in .claude/commands/ and a SessionEnd hook in .claude/settings.json that\n" +
			"releases the claims of a ralph agent whose session ends. Existing files are kept; the\n" +
			"hook is merged into existing settings. Running init again changes nothing.",
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
	settings, err := mergedSettings(settingsPath)
	if err != nil {
		return err
	}
	// An existing database is opened (and migrated) before anything is
	// created, so that one which is corrupt, foreign or newer than this
	// ralph stops init with nothing changed.
	dbExists := fileExists(p.dbPath())
	if dbExists {
		if err := openAndClose(c, cfg, p.dbPath()); err != nil {
			return err
		}
	}

	var created []string
	for _, d := range append([]string{""}, projectDirs...) {
		dir := filepath.Join(p.ralph, d)
		if fileExists(dir) {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		created = append(created, "created "+p.rel(dir)+"/")
	}
	if !dbExists {
		if err := openAndClose(c, cfg, p.dbPath()); err != nil {
			return err
		}
		created = append(created, "created "+p.rel(p.dbPath()))
	}

	cmdPath := filepath.Join(p.root, ".claude", "commands", "ralph-build.md")
	if !fileExists(cmdPath) {
		if err := writeFileAtomic(cmdPath, ralphBuildCommand, 0o644); err != nil {
			return err
		}
		created = append(created, "created "+p.rel(cmdPath))
	}
	if settings != nil {
		what := "created " + p.rel(settingsPath) + " (SessionEnd hook)"
		if fileExists(settingsPath) {
			what = "added the SessionEnd hook to " + p.rel(settingsPath)
		}
		if err := writeFileAtomic(settingsPath, settings, 0o644); err != nil {
			return err
		}
		created = append(created, what)
	}

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

// mergedSettings returns the content .claude/settings.json should have with
// ralph's SessionEnd hook, or nil when the file already has it.
func mergedSettings(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		data = nil
	} else if err != nil {
		return nil, err
	}
	out, changed, err := addSessionEndHook(data, sessionEndHook)
	if err != nil {
		return nil, fmt.Errorf("cannot add ralph's hook to %s: %w (fix or move the file, then run 'ralph init' again)", path, err)
	}
	if !changed {
		return nil, nil
	}
	return out, nil
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
