package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/safefile"
)

// syncFeatureFiles keeps the feature specs and plans of a plan on a
// server the same in the project and in the database (ARCHITECTURE.md §6: every
// machine reads the same). For each feature's spec and plan file the
// newer copy wins: a file the database lacks, or one changed here since
// the database's copy was stored, is stored; a file missing here, or
// older than the database's copy and different, is written from it. It
// runs when a feature is added and at the start and end of build, plan
// and prompt. On SQLite it does nothing: the project's files are the only
// copy.
func syncFeatureFiles(ctx context.Context, st *dag.Store, p project) error {
	if st == nil || st.Server() == nil {
		return nil
	}
	features, err := st.Features(ctx)
	if err != nil {
		return err
	}
	stored, err := st.FeatureFiles(ctx)
	if err != nil {
		return err
	}
	for _, f := range features {
		for _, rel := range []string{f.SpecPath, f.PlanPath} {
			if rel == "" || filepath.IsAbs(rel) {
				continue
			}
			// No link is followed (ARCHITECTURE.md §7): a spec an agent
			// linked to a secret must not be uploaded to the shared plan.
			path := filepath.Join(p.root, rel)
			data, rerr := safefile.ReadFile(p.root, path)
			fi, serr := safefile.Lstat(p.root, path)
			db, inDB := stored[filepath.ToSlash(rel)]
			switch {
			case rerr != nil && !errors.Is(rerr, os.ErrNotExist):
				return rerr
			case rerr == nil && serr == nil && (!inDB || (string(data) != db.Content && fi.ModTime().After(db.UpdatedAt))):
				if err := st.PutFeatureFile(ctx, filepath.ToSlash(rel), string(data)); err != nil {
					return err
				}
			case inDB && (rerr != nil || string(data) != db.Content):
				if err := safefile.MkdirAll(p.root, filepath.Dir(path), 0o755); err != nil {
					return err
				}
				mode := os.FileMode(0o644)
				if fi, err := safefile.Lstat(p.root, path); err == nil && fi.Mode().IsRegular() {
					mode = fi.Mode().Perm()
				}
				if err := safefile.WriteFile(p.root, path, []byte(db.Content), mode); err != nil {
					return err
				}
				os.Chtimes(path, db.UpdatedAt, db.UpdatedAt)
			}
		}
	}
	return nil
}
