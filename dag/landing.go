package dag

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

var _ loop.LandingStore = (*Store)(nil)

// landingCols are the columns scanLanding reads, in order.
const landingCols = `branch, commit_id, parent_commit, task_id, generation, completions, state, recorded_at, updated_at`

func scanLanding(r scanner) (loop.Landing, error) {
	var l loop.Landing
	var state string
	var recorded, updated int64
	err := r.Scan(&l.Branch, &l.Commit, &l.Parent, &l.TaskID, &l.Generation, &l.Completions, &state, &recorded, &updated)
	l.State, l.RecordedAt, l.UpdatedAt = loop.LandingState(state), fromNanos(recorded), fromNanos(updated)
	return l, err
}

// landing reads the landing of commit on branch; ok false when there is
// none.
func (t *txn) landing(branch, commit string) (l loop.Landing, ok bool, err error) {
	l, err = scanLanding(t.row(`SELECT `+landingCols+` FROM landings WHERE branch = ? AND commit_id = ?`+t.forUpdate(), branch, commit))
	if errors.Is(err, sql.ErrNoRows) {
		return loop.Landing{}, false, nil
	}
	return l, err == nil, err
}

// RecordLanding implements loop.LandingStore.
func (s *Store) RecordLanding(ctx context.Context, l loop.Landing) error {
	if l.Branch == "" || l.Commit == "" || l.TaskID == "" {
		return fmt.Errorf("dag: landing of %q on %q for task %q: branch, commit and task are required", l.Commit, l.Branch, l.TaskID)
	}
	if l.Commit == l.Parent {
		return fmt.Errorf("dag: landing of %s on %s for task %s: the commit is its own parent (the branch would not move: nothing lands)", l.Commit, l.Branch, l.TaskID)
	}
	return s.writeNoTask(ctx, func(t *txn) error {
		old, ok, err := t.landing(l.Branch, l.Commit)
		if err != nil {
			return err
		}
		if ok {
			if old.TaskID == l.TaskID && old.Generation == l.Generation && old.Parent == l.Parent {
				return nil
			}
			return fmt.Errorf("%w: %s on %s is task %s's (claim %d)", loop.ErrLandingExists, l.Commit, l.Branch, old.TaskID, old.Generation)
		}
		_, err = t.exec(`INSERT INTO landings (branch, commit_id, parent_commit, task_id, generation, completions, state, recorded_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, l.Branch, l.Commit, l.Parent, l.TaskID, l.Generation, l.Completions,
			string(loop.LandingRecorded), t.now, t.now)
		return err
	})
}

// ConfirmLanding implements loop.LandingStore.
func (s *Store) ConfirmLanding(ctx context.Context, branch, commit string) error {
	return s.writeNoTask(ctx, func(t *txn) error {
		l, ok, err := t.landing(branch, commit)
		if err != nil {
			return err
		}
		if !ok || l.State == loop.LandingVoid || l.State == loop.LandingDropped {
			return fmt.Errorf("%w: %s on %s", loop.ErrNoLanding, commit, branch)
		}
		if l.State != loop.LandingLanded {
			if _, err := t.exec(`UPDATE landings SET state = ?, updated_at = ? WHERE branch = ? AND commit_id = ?`,
				string(loop.LandingLanded), t.now, branch, commit); err != nil {
				return err
			}
		}
		_, err = t.exec(`UPDATE branch_tips SET commit_id = ?, updated_at = ? WHERE branch = ? AND commit_id = ?`,
			commit, t.now, branch, l.Parent)
		return err
	})
}

// VoidLanding implements loop.LandingStore.
func (s *Store) VoidLanding(ctx context.Context, branch, commit string) error {
	return s.writeNoTask(ctx, func(t *txn) error {
		l, ok, err := t.landing(branch, commit)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s on %s", loop.ErrNoLanding, commit, branch)
		}
		if l.State != loop.LandingRecorded {
			return nil
		}
		_, err = t.exec(`UPDATE landings SET state = ?, updated_at = ? WHERE branch = ? AND commit_id = ?`,
			string(loop.LandingVoid), t.now, branch, commit)
		return err
	})
}

// Landings implements loop.LandingStore.
func (s *Store) Landings(ctx context.Context, q loop.LandingQuery) ([]loop.Landing, error) {
	conds, args := []string{"branch = ?"}, []any{q.Branch}
	if q.TaskID != "" {
		conds, args = append(conds, "task_id = ?"), append(args, q.TaskID)
	}
	if q.Commit != "" {
		conds, args = append(conds, "commit_id = ?"), append(args, q.Commit)
	}
	if len(q.States) > 0 {
		conds = append(conds, "state IN ("+placeholders(len(q.States))+")")
		for _, st := range q.States {
			args = append(args, string(st))
		}
	}
	return queryAll(ctx, s, scanLanding, `SELECT `+landingCols+` FROM landings WHERE `+strings.Join(conds, " AND ")+` ORDER BY seq`, args...)
}

// BranchTip implements loop.LandingStore.
func (s *Store) BranchTip(ctx context.Context, branch string) (commit string, ok bool, err error) {
	err = s.read(ctx, func(t *txn) error {
		err := t.row(`SELECT commit_id FROM branch_tips WHERE branch = ?`, branch).Scan(&commit)
		if errors.Is(err, sql.ErrNoRows) {
			commit, ok = "", false
			return nil
		}
		ok = err == nil
		return err
	})
	return commit, ok, err
}

// branchTip reads branch's tip in a write transaction ("" when none).
func (t *txn) branchTip(branch string) (string, error) {
	var tip string
	err := t.row(`SELECT commit_id FROM branch_tips WHERE branch = ?`+t.forUpdate(), branch).Scan(&tip)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return tip, err
}

// setBranchTip records commit as branch's tip.
func (t *txn) setBranchTip(branch, commit string) error {
	_, err := t.exec(`INSERT INTO branch_tips (branch, commit_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (branch) DO UPDATE SET commit_id = excluded.commit_id, updated_at = excluded.updated_at`, branch, commit, t.now)
	return err
}

// MoveBranchTip implements loop.LandingStore.
func (s *Store) MoveBranchTip(ctx context.Context, branch, old, new string) (string, error) {
	if branch == "" || new == "" {
		return "", fmt.Errorf("dag: branch tip %q of %q: both are required", new, branch)
	}
	var now string
	err := s.writeNoTask(ctx, func(t *txn) error {
		tip, err := t.branchTip(branch)
		if err != nil {
			return err
		}
		now = tip
		if tip != old {
			return nil
		}
		now = new
		return t.setBranchTip(branch, new)
	})
	return now, err
}

// AcceptTip implements loop.LandingStore.
func (s *Store) AcceptTip(ctx context.Context, p loop.AcceptTipParams) ([]string, error) {
	if p.Branch == "" || p.Tip == "" {
		return nil, fmt.Errorf("dag: accept tip %q of %q: both are required", p.Tip, p.Branch)
	}
	var reopened []string
	err := s.writeAs(ctx, p.By.Name(), func(t *txn) error {
		reopened = reopened[:0]
		if err := t.setBranchTip(p.Branch, p.Tip); err != nil {
			return err
		}
		for _, c := range p.Drop {
			l, ok, err := t.landing(p.Branch, c)
			if err != nil {
				return err
			}
			if !ok || l.State == loop.LandingVoid || l.State == loop.LandingDropped {
				continue
			}
			if _, err := t.exec(`UPDATE landings SET state = ?, updated_at = ? WHERE branch = ? AND commit_id = ?`,
				string(loop.LandingDropped), t.now, p.Branch, c); err != nil {
				return err
			}
			ids, err := t.reopen(l.TaskID, p.Reason)
			if err != nil {
				return err
			}
			reopened = append(reopened, ids...)
		}
		return nil
	})
	return reopened, err
}

// reopen returns done task id to pending, logged LogReopen with reason,
// and its done ancestors with it: their dependents count them as unmet
// blockers again. A task that is not done, or no longer exists, is left
// alone. It returns the ids it moved.
func (t *txn) reopen(id, reason string) ([]string, error) {
	var moved []string
	for child, cur, why := "", id, reason; cur != ""; {
		st, err := t.state(cur)
		if errors.Is(err, loop.ErrNotFound) {
			return moved, nil
		}
		if err != nil {
			return moved, err
		}
		if st.status != loop.StatusDone {
			return moved, nil
		}
		if err := t.setStatus(cur, loop.StatusDone, loop.StatusPending); err != nil {
			return moved, err
		}
		if st.deps > 0 {
			if _, err := t.exec(`UPDATE tasks SET unmet_blockers = unmet_blockers + 1
				WHERE id IN (SELECT blocked_id FROM deps WHERE blocker_id = ?)`, cur); err != nil {
				return moved, err
			}
		}
		if err := t.log(cur, loop.LogReopen, why); err != nil {
			return moved, err
		}
		moved = append(moved, cur)
		if child == "" {
			child = cur
		}
		cur, why = st.parentID, "subtask "+child+" reopened"
	}
	return moved, nil
}
