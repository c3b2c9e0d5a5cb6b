package dag

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/ralph-dev/ralph/safefile"
)

// SyncFeatureFiles keeps the feature specs and plans of a plan on a
// server the same in the project whose root is root and in the database
// (ARCHITECTURE.md §6: every machine reads the same). For each feature's
// spec and plan file the newer copy wins: a file the database lacks, or
// one changed in the project since the database's copy was stored, is
// stored; a file missing from the project, or older than the database's
// copy and different, is written from it (with the stored copy's time).
// Paths that are absolute are left alone, and no link is followed
// (package safefile): a spec an agent linked to a secret is never
// uploaded to the shared plan. ralph runs it when a feature is added and
// at the start and end of build, plan and prompt. On SQLite it does
// nothing: the project's files are the only copy.
func (s *Store) SyncFeatureFiles(ctx context.Context, root string) error {
	if s == nil || s.d.featureFiles() != nil {
		return nil // the plan keeps no feature files: the project's are the only copy
	}
	features, err := s.Features(ctx)
	if err != nil {
		return err
	}
	stored, err := s.FeatureFiles(ctx)
	if err != nil {
		return err
	}
	for _, f := range features {
		for _, rel := range []string{f.SpecPath, f.PlanPath} {
			if rel == "" || filepath.IsAbs(rel) {
				continue
			}
			db, inDB := stored[filepath.ToSlash(rel)]
			if err := s.syncFeatureFile(ctx, root, rel, db, inDB); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncFeatureFile brings the project's copy of the feature file rel and
// the database's, db (inDB: there is one), together (SyncFeatureFiles).
func (s *Store) syncFeatureFile(ctx context.Context, root, rel string, db FeatureFile, inDB bool) error {
	path := filepath.Join(root, rel)
	data, rerr := safefile.ReadFile(root, path)
	fi, serr := safefile.Lstat(root, path)
	switch {
	case rerr != nil && !errors.Is(rerr, os.ErrNotExist):
		return rerr
	case rerr == nil && serr == nil && (!inDB || (string(data) != db.Content && fi.ModTime().After(db.UpdatedAt))):
		return s.PutFeatureFile(ctx, filepath.ToSlash(rel), string(data))
	case inDB && (rerr != nil || string(data) != db.Content):
		return writeFeatureFile(root, path, db)
	}
	return nil
}

// writeFeatureFile writes the database's copy db of a feature file to
// path below root, keeping the permissions of a regular file there, and
// dates it as db was stored.
func writeFeatureFile(root, path string, db FeatureFile) error {
	if err := safefile.MkdirAll(root, filepath.Dir(path), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if fi, err := safefile.Lstat(root, path); err == nil && fi.Mode().IsRegular() {
		mode = fi.Mode().Perm()
	}
	if err := safefile.WriteFile(root, path, []byte(db.Content), mode); err != nil {
		return err
	}
	os.Chtimes(path, db.UpdatedAt, db.UpdatedAt)
	return nil
}
