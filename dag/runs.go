package dag

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

var _ loop.RunRecorder = (*Store)(nil)

// runCols are the columns scanRun reads, in order.
const runCols = `seq, kind, holder_host, holder_pid, holder_start, started_at, ended_at, outcome, exit_code,
	done, failed, remaining, cost_usd, agents, integration_tip, version, agent_names`

func scanRun(r scanner) (loop.RunRecord, error) {
	var rr loop.RunRecord
	var kind, outcome string
	var started, ended int64
	var code sql.NullInt64
	var names string
	err := r.Scan(&rr.ID, &kind, &rr.Holder.Host, &rr.Holder.PID, &rr.Holder.Start, &started, &ended, &outcome, &code,
		&rr.Done, &rr.Failed, &rr.Remaining, &rr.CostUSD, &rr.Agents, &rr.IntegrationTip, &rr.Version, &names)
	if names != "" {
		rr.AgentNames = strings.Split(names, ",")
	}
	rr.Kind, rr.Outcome = loop.RunKind(kind), loop.Outcome(outcome)
	rr.StartedAt, rr.EndedAt = fromNanos(started), fromNanos(ended)
	if code.Valid {
		c := int(code.Int64)
		rr.ExitCode = &c
	}
	return rr, err
}

// BeginRun implements loop.RunRecorder.
func (s *Store) BeginRun(ctx context.Context, r loop.RunRecord) (int64, error) {
	if !r.Kind.Valid() {
		return 0, fmt.Errorf("dag: run of kind %q: want build, plan or prompt", r.Kind)
	}
	var id int64
	err := s.writeNoTask(ctx, func(t *txn) error {
		return t.row(`INSERT INTO runs (kind, holder_host, holder_pid, holder_start, started_at, outcome, version)
			VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
			string(r.Kind), r.Holder.Host, r.Holder.PID, r.Holder.Start, t.now, string(loop.RunRunning), r.Version).Scan(&id)
	})
	return id, err
}

// EndRun implements loop.RunRecorder.
func (s *Store) EndRun(ctx context.Context, id int64, end loop.RunEnd) error {
	if err := end.Check(); err != nil {
		return fmt.Errorf("dag: end of run %d: %w", id, err)
	}
	return s.writeNoTask(ctx, func(t *txn) error {
		res, err := t.exec(`UPDATE runs SET ended_at = ?, outcome = ?, exit_code = ?, done = ?, failed = ?, remaining = ?,
			cost_usd = ?, agents = ?, integration_tip = ?, agent_names = ? WHERE seq = ? AND outcome = ?`,
			t.now, string(end.Outcome), end.ExitCode, end.Done, end.Failed, end.Remaining,
			end.CostUSD, end.Agents, end.IntegrationTip, strings.Join(end.AgentNames, ","), id, string(loop.RunRunning))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		var one int
		err = t.row(`SELECT 1 FROM runs WHERE seq = ?`, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %d", loop.ErrNoRun, id)
		}
		return err // ended already: nothing changes
	})
}

// Runs implements loop.RunRecorder.
func (s *Store) Runs(ctx context.Context, n int) ([]loop.RunRecord, error) {
	q, args := `SELECT `+runCols+` FROM runs ORDER BY seq DESC`, []any{}
	if n > 0 {
		q, args = q+` LIMIT ?`, append(args, n)
	}
	return queryAll(ctx, s, scanRun, q, args...)
}
