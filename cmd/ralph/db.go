package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/hostgit"
)

// dbTarget is where a project's plan lives: the SQLite file in .ralph/
// (url ""), or a plan on a PostgreSQL server (ARCHITECTURE.md §6).
type dbTarget struct {
	url  string // as given: it may hold a password, which is never written
	plan string
	// from says where url came from, for messages: "--db", "$RALPH_DB",
	// ".ralph/db.json".
	from string
}

func (d dbTarget) server() bool { return d.url != "" }

// dbFile is what `ralph init --db` remembers: the URL without its
// password, and the plan's name.
type dbFile struct {
	URL  string `json:"url"`
	Plan string `json:"plan"`
}

func (p project) dbFilePath() string { return filepath.Join(p.ralph, "db.json") }

// resolveDB finds the plan's database: --db or $RALPH_DB, else the one
// `ralph init --db` remembered; the plan name from --plan or $RALPH_PLAN,
// else the remembered one, else the project directory's name.
func resolveDB(c *cli.Context, p project) (dbTarget, error) {
	var d dbTarget
	var remembered dbFile
	data, err := os.ReadFile(p.dbFilePath())
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &remembered); err != nil {
			return dbTarget{}, fmt.Errorf("%s: %v (ralph init --db URL writes it again)", p.rel(p.dbFilePath()), err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return dbTarget{}, err
	}
	// An empty --db or $RALPH_DB (RALPH_DB= in an agent's environment)
	// names nothing. Both are the app's flags, read where the app holds
	// them: `feature add --plan FILE` has a flag of the same name.
	flagPlan := strings.TrimSpace(globalString(c, "plan"))
	flagDB := strings.TrimSpace(globalString(c, "db"))
	switch {
	case flagDB != "":
		d.url, d.from = flagDB, "--db"
	case remembered.URL != "":
		d.url, d.from = remembered.URL, p.rel(p.dbFilePath())
	}
	if d.url == "" {
		if flagPlan != "" {
			return dbTarget{}, errors.New("--plan names a plan on a database server: give --db URL (or $RALPH_DB) too")
		}
		return d, nil
	}
	if !isPostgresURL(d.url) {
		return dbTarget{}, fmt.Errorf("%s %s: want a postgres:// URL (the SQLite plan needs no --db)", d.from, postgres.Redact(d.url))
	}
	switch {
	case flagPlan != "":
		d.plan = flagPlan
	case remembered.Plan != "":
		d.plan = remembered.Plan
	default:
		d.plan = filepath.Base(p.root)
	}
	if err := postgres.CheckPlanName(d.plan); err != nil {
		return dbTarget{}, errors.New(strings.TrimPrefix(err.Error(), "postgres: "))
	}
	return d, nil
}

// globalString is the value of the app's flag name (given before the
// command, or its environment variable). c.String finds the nearest flag
// of that name instead, which is a command's own where it has one: after
// `feature add`, --plan is the plan file to copy, not the plan's name on
// the server.
func globalString(c *cli.Context, name string) string {
	lineage := c.Lineage()
	for i := len(lineage) - 1; i >= 0; i-- {
		l := lineage[i]
		if l.Command == nil {
			continue
		}
		for _, f := range l.Command.Flags {
			if slices.Contains(f.Names(), name) {
				return l.String(name)
			}
		}
	}
	return c.String(name)
}

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// openServerStore opens (with create, makes) the plan d names, checking it
// belongs to this repository.
func openServerStore(c *cli.Context, cfg appConfig, p project, d dbTarget, create bool) (*dag.Store, error) {
	return postgres.Open(c.Context, postgres.Config{
		URL:        d.url,
		Plan:       d.plan,
		RootCommit: rootCommit(c.Context, p.root),
		Create:     create,
		Options:    dag.ServerOptions{Options: cfg.storeOptions(), OnTrouble: serverTrouble(cfg.stderr)},
	})
}

// serverTrouble says on w when the plan's server stops answering, while
// ralph retries, and when it answers again: an outage is announced while
// it lasts, never a silent stall (DESIGN §15). The error names the plan
// and the server (without a password).
func serverTrouble(w io.Writer) func(dag.ServerTrouble) {
	var mu sync.Mutex
	return func(tr dag.ServerTrouble) {
		mu.Lock()
		defer mu.Unlock()
		if tr.Down {
			fmt.Fprintf(w, "ralph: the plan's server does not answer since %s; retrying: %v\n", tr.Since.Format(time.TimeOnly), tr.Err)
			return
		}
		fmt.Fprintf(w, "ralph: the plan's server answers again (it did not for %s)\n", time.Since(tr.Since).Round(time.Second))
	}
}

// rootCommit is the repository's first commit (the oldest root when it has
// several), "" outside a repository or before its first commit. git runs
// as every host git command of ralph's does (package hostgit).
func rootCommit(ctx context.Context, dir string) string {
	repo, err := hostgit.Find(dir)
	if err != nil {
		return ""
	}
	out, err := repo.Run(ctx, dir, "rev-list", "--max-parents=0", "HEAD")
	if err != nil {
		return ""
	}
	roots := strings.Fields(string(out))
	if len(roots) == 0 {
		return ""
	}
	return roots[len(roots)-1]
}

// openPlanStore opens the project's plan, wherever it lives; missing is
// the error for a project without a SQLite database.
func openPlanStore(c *cli.Context, cfg appConfig, p project, missing func() error) (*dag.Store, dbTarget, error) {
	d, err := resolveDB(c, p)
	if err != nil {
		return nil, d, err
	}
	if d.server() {
		st, err := openServerStore(c, cfg, p, d, false)
		return st, d, err
	}
	st, err := dag.OpenExisting(c.Context, p.dbPath(), cfg.storeOptions())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, d, missing()
	}
	return st, d, err
}

// rememberDB writes .ralph/db.json: the URL without its password, and the
// plan.
func rememberDB(p project, d dbTarget) (bool, error) {
	data, err := json.MarshalIndent(dbFile{URL: postgres.Redact(d.url), Plan: d.plan}, "", "  ")
	if err != nil {
		return false, err
	}
	data = append(data, '\n')
	if old, err := os.ReadFile(p.dbFilePath()); err == nil && string(old) == string(data) {
		return false, nil
	}
	return true, writeFileAtomic(p.dbFilePath(), data, 0o644)
}

// serverEnv is what an agent's own `ralph task …` calls need to reach the
// plan: the URL as given (environment, never disk) and the plan.
func serverEnv(d dbTarget) []string {
	if !d.server() {
		return nil
	}
	return []string{"RALPH_DB=" + d.url, "RALPH_PLAN=" + d.plan}
}
