package looptest

import (
	"context"
	"fmt"
	"slices"

	"github.com/ralph-dev/ralph/loop"
)

var _ loop.RunRecorder = (*MemStore)(nil)

// BeginRun implements loop.RunRecorder.
func (s *MemStore) BeginRun(ctx context.Context, r loop.RunRecord) (int64, error) {
	now, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	if !r.Kind.Valid() {
		return 0, fmt.Errorf("looptest: run of kind %q: want build, plan or prompt", r.Kind)
	}
	s.runs = append(s.runs, loop.RunRecord{ID: int64(len(s.runs) + 1), Kind: r.Kind, Holder: r.Holder,
		StartedAt: now, Outcome: loop.RunRunning, Version: r.Version})
	return int64(len(s.runs)), nil
}

// EndRun implements loop.RunRecorder.
func (s *MemStore) EndRun(ctx context.Context, id int64, end loop.RunEnd) error {
	now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if id < 1 || id > int64(len(s.runs)) {
		return fmt.Errorf("%w: %d", loop.ErrNoRun, id)
	}
	if err := end.Check(); err != nil {
		return fmt.Errorf("looptest: end of run %d: %w", id, err)
	}
	r := &s.runs[id-1]
	if !r.Running() {
		return nil
	}
	code := end.ExitCode
	r.EndedAt, r.Outcome, r.ExitCode = now, end.Outcome, &code
	r.Done, r.Failed, r.Remaining = end.Done, end.Failed, end.Remaining
	r.CostUSD, r.Agents, r.IntegrationTip = end.CostUSD, end.Agents, end.IntegrationTip
	r.AgentNames = slices.Clone(end.AgentNames)
	return nil
}

// Runs implements loop.RunRecorder.
func (s *MemStore) Runs(ctx context.Context, n int) ([]loop.RunRecord, error) {
	if _, err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if n <= 0 || n > len(s.runs) {
		n = len(s.runs)
	}
	out := make([]loop.RunRecord, 0, n)
	for i := len(s.runs) - 1; len(out) < n; i-- {
		r := s.runs[i]
		if r.ExitCode != nil {
			code := *r.ExitCode
			r.ExitCode = &code
		}
		out = append(out, r)
	}
	return out, nil
}
