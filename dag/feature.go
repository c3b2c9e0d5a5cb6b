package dag

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// FeatureParams are the arguments of Store.AddFeature. The paths are stored
// as given; the CLI fills in .ralph/features/<name>/spec.md and plan.md.
type FeatureParams struct{ Name, SpecPath, PlanPath string }

// AddFeature creates a feature. Errors: ErrFeatureExists, or a plain error
// for a name that could not be a directory name (blank, with a slash or
// spaces, "." or "..").
func (s *Store) AddFeature(ctx context.Context, p FeatureParams) (loop.Feature, error) {
	if err := checkFeatureName(p.Name); err != nil {
		return loop.Feature{}, err
	}
	var f loop.Feature
	err := s.write(ctx, func(t *txn) error {
		if err := t.featureExists(p.Name); err == nil {
			return fmt.Errorf("%w: %q", ErrFeatureExists, p.Name)
		} else if !errors.Is(err, loop.ErrFeatureNotFound) {
			return err
		}
		if _, err := t.exec(`INSERT INTO features (name, spec_path, plan_path, created_at) VALUES (?, ?, ?, ?)`,
			p.Name, p.SpecPath, p.PlanPath, t.now); err != nil {
			return err
		}
		f = loop.Feature{Name: p.Name, SpecPath: p.SpecPath, PlanPath: p.PlanPath, CreatedAt: fromNanos(t.now)}
		return nil
	})
	return f, err
}

func checkFeatureName(name string) error {
	if strings.TrimSpace(name) == "" {
		return errors.New("dag: a feature needs a name")
	}
	if name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r == 0x7f
	}) {
		return fmt.Errorf("dag: feature name %q: must be usable as a directory name (no slashes, spaces or control characters)", name)
	}
	return nil
}

// Features implements loop.FeatureStore: every feature, in creation order.
func (s *Store) Features(ctx context.Context) ([]loop.Feature, error) {
	return queryAll(ctx, s, func(r scanner) (loop.Feature, error) {
		var f loop.Feature
		var at int64
		err := r.Scan(&f.Name, &f.SpecPath, &f.PlanPath, &at)
		f.CreatedAt = fromNanos(at)
		return f, err
	}, `SELECT name, spec_path, plan_path, created_at FROM features ORDER BY seq`)
}

// Feature implements loop.FeatureStore. Error: loop.ErrFeatureNotFound.
func (s *Store) Feature(ctx context.Context, name string) (loop.Feature, error) {
	var f loop.Feature
	err := s.read(ctx, func(t *txn) error {
		var at int64
		err := t.row(`SELECT name, spec_path, plan_path, created_at FROM features WHERE name = ?`, name).
			Scan(&f.Name, &f.SpecPath, &f.PlanPath, &at)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", loop.ErrFeatureNotFound, name)
		}
		f.CreatedAt = fromNanos(at)
		return err
	})
	return f, err
}

// RecordReceipt implements loop.ReceiptStore.
func (s *Store) RecordReceipt(ctx context.Context, r loop.Receipt) error {
	return s.write(ctx, func(t *txn) error {
		var started int64
		if !r.StartedAt.IsZero() {
			started = r.StartedAt.UnixNano()
		}
		_, err := t.exec(`INSERT INTO receipts (session, iteration, mode, task_id, model, input_tokens,
			output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, started_at, duration_ns, turns,
			exit_reason, verdict, worker, agent, cost_source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.Session, r.Iteration, r.Mode, r.TaskID, r.Model, r.InputTokens, r.OutputTokens,
			r.CacheReadTokens, r.CacheWriteTokens, r.CostUSD, started, int64(r.Duration), r.Turns,
			r.ExitReason, r.Verdict, r.Worker, r.Agent, string(r.CostSource))
		return err
	})
}

// RecordResult implements loop.ResultStore.
func (s *Store) RecordResult(ctx context.Context, session, worker string, n int, status loop.IterationStatus) error {
	return s.write(ctx, func(t *txn) error {
		_, err := t.exec(`UPDATE receipts SET result = ? WHERE session = ? AND worker = ? AND iteration = ? AND mode <> ?`,
			string(status), session, worker, n, string(loop.ModeVerify))
		return err
	})
}

// Receipts implements loop.ReceiptStore: the latest receipts, newest first
// (by insertion), at most limit (limit <= 0: all).
func (s *Store) Receipts(ctx context.Context, limit int) ([]loop.Receipt, error) {
	if limit <= 0 {
		limit = math.MaxInt64 // all (LIMIT -1 is SQLite's alone)
	}
	return queryAll(ctx, s, scanReceipt, `SELECT session, iteration, mode, task_id, model, input_tokens, output_tokens,
		cache_read_tokens, cache_write_tokens, cost_usd, started_at, duration_ns, turns, exit_reason, verdict, worker,
		agent, cost_source, result FROM receipts ORDER BY seq DESC LIMIT ?`, limit)
}

// scanReceipt reads a row of Receipts' query.
func scanReceipt(rows scanner) (loop.Receipt, error) {
	var r loop.Receipt
	var started, dur int64
	err := rows.Scan(&r.Session, &r.Iteration, &r.Mode, &r.TaskID, &r.Model, &r.InputTokens,
		&r.OutputTokens, &r.CacheReadTokens, &r.CacheWriteTokens, &r.CostUSD, &started, &dur,
		&r.Turns, &r.ExitReason, &r.Verdict, &r.Worker, &r.Agent, &r.CostSource, &r.Result)
	r.StartedAt, r.Duration = fromNanos(started), time.Duration(dur)
	return r, err
}

// PlanSetting implements loop.SettingStore: the value key was recorded
// with, ok false when it never was.
func (s *Store) PlanSetting(ctx context.Context, key string) (value string, ok bool, err error) {
	err = s.read(ctx, func(t *txn) error {
		rows, err := t.query(`SELECT value FROM plan_settings WHERE key = ?`, key)
		if err != nil {
			return err
		}
		defer rows.Close()
		if rows.Next() {
			ok = true
			return rows.Scan(&value)
		}
		return rows.Err()
	})
	return value, ok, err
}

// RecordPlanSetting implements loop.SettingStore: it records value under
// key unless key has a value already, and returns the value key has now.
func (s *Store) RecordPlanSetting(ctx context.Context, key, value string) (string, error) {
	var now string
	err := s.write(ctx, func(t *txn) error {
		if _, err := t.exec(`INSERT INTO plan_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`, key, value); err != nil {
			return err
		}
		rows, err := t.query(`SELECT value FROM plan_settings WHERE key = ?`, key)
		if err != nil {
			return err
		}
		defer rows.Close()
		if !rows.Next() {
			return fmt.Errorf("dag: plan setting %s: not recorded", key)
		}
		return rows.Scan(&now)
	})
	return now, err
}

// FeatureFile is a feature's spec or plan as a Store on a server keeps
// it, so that every machine reads the same (ARCHITECTURE.md §6): its path
// relative to the project's root (as Feature.SpecPath names it), its
// content, and when it was stored.
type FeatureFile struct {
	Path      string
	Content   string
	UpdatedAt time.Time
}

// ErrNoFeatureFiles: the store keeps no feature files (a SQLite plan: the
// project's files are the only copy).
var ErrNoFeatureFiles = errors.New("dag: feature files live in the project, not in a SQLite plan")

// FeatureFiles returns the feature files a Store on a server keeps, by
// path. Errors: ErrNoFeatureFiles on SQLite.
func (s *Store) FeatureFiles(ctx context.Context) (map[string]FeatureFile, error) {
	if err := s.d.featureFiles(); err != nil {
		return nil, err
	}
	out := map[string]FeatureFile{}
	err := s.read(ctx, func(t *txn) error {
		rows, err := t.query(`SELECT path, content, updated_at FROM feature_files`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f FeatureFile
			var at int64
			if err := rows.Scan(&f.Path, &f.Content, &at); err != nil {
				return err
			}
			f.UpdatedAt = fromNanos(at)
			out[f.Path] = f
		}
		return rows.Err()
	})
	return out, err
}

// PutFeatureFile stores a feature file's content. Errors:
// ErrNoFeatureFiles on SQLite.
func (s *Store) PutFeatureFile(ctx context.Context, path, content string) error {
	if err := s.d.featureFiles(); err != nil {
		return err
	}
	return s.write(ctx, func(t *txn) error {
		_, err := t.exec(`INSERT INTO feature_files (path, content, updated_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (path) DO UPDATE SET content = ?2, updated_at = ?3`, path, content, t.now)
		return err
	})
}
