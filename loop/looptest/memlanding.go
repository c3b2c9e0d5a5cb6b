package looptest

import (
	"context"
	"fmt"
	"slices"

	"github.com/ralph-dev/ralph/loop"
)

var _ loop.LandingStore = (*MemStore)(nil)

// memLandings is what a MemStore records of its integration branches.
type memLandings struct {
	list []*loop.Landing             // in the order recorded
	tips map[string]string           // branch → where ralph last put it
	idx  map[[2]string]*loop.Landing // (branch, commit) → landing
}

func (m *memLandings) get(branch, commit string) *loop.Landing {
	return m.idx[[2]string{branch, commit}]
}

// RecordLanding implements loop.LandingStore.
func (s *MemStore) RecordLanding(ctx context.Context, l loop.Landing) error {
	now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if l.Branch == "" || l.Commit == "" || l.TaskID == "" {
		return fmt.Errorf("looptest: landing %+v: branch, commit and task are required", l)
	}
	if l.Commit == l.Parent {
		return fmt.Errorf("looptest: landing %+v: the commit is its own parent (nothing lands)", l)
	}
	m := &s.landings
	if old := m.get(l.Branch, l.Commit); old != nil {
		if old.TaskID == l.TaskID && old.Generation == l.Generation && old.Parent == l.Parent {
			return nil
		}
		return fmt.Errorf("%w: %s on %s is task %s's (claim %d)", loop.ErrLandingExists, l.Commit, l.Branch, old.TaskID, old.Generation)
	}
	if m.idx == nil {
		m.idx, m.tips = map[[2]string]*loop.Landing{}, map[string]string{}
	}
	l.State, l.RecordedAt, l.UpdatedAt = loop.LandingRecorded, now, now
	m.list = append(m.list, &l)
	m.idx[[2]string{l.Branch, l.Commit}] = &l
	return nil
}

// ConfirmLanding implements loop.LandingStore.
func (s *MemStore) ConfirmLanding(ctx context.Context, branch, commit string) error {
	now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	l := s.landings.get(branch, commit)
	if l == nil || l.State == loop.LandingVoid || l.State == loop.LandingDropped {
		return fmt.Errorf("%w: %s on %s", loop.ErrNoLanding, commit, branch)
	}
	if l.State != loop.LandingLanded {
		l.State, l.UpdatedAt = loop.LandingLanded, now
	}
	if s.landings.tips[branch] == l.Parent {
		s.landings.tips[branch] = commit
	}
	return nil
}

// VoidLanding implements loop.LandingStore.
func (s *MemStore) VoidLanding(ctx context.Context, branch, commit string) error {
	now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	l := s.landings.get(branch, commit)
	if l == nil {
		return fmt.Errorf("%w: %s on %s", loop.ErrNoLanding, commit, branch)
	}
	if l.State == loop.LandingRecorded {
		l.State, l.UpdatedAt = loop.LandingVoid, now
	}
	return nil
}

// Landings implements loop.LandingStore.
func (s *MemStore) Landings(ctx context.Context, q loop.LandingQuery) ([]loop.Landing, error) {
	if _, err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []loop.Landing
	for _, l := range s.landings.list {
		if l.Branch != q.Branch || q.TaskID != "" && l.TaskID != q.TaskID || q.Commit != "" && l.Commit != q.Commit ||
			len(q.States) > 0 && !slices.Contains(q.States, l.State) {
			continue
		}
		out = append(out, *l)
	}
	return out, nil
}

// BranchTip implements loop.LandingStore.
func (s *MemStore) BranchTip(ctx context.Context, branch string) (string, bool, error) {
	if _, err := s.begin(ctx); err != nil {
		return "", false, err
	}
	defer s.mu.Unlock()
	tip, ok := s.landings.tips[branch]
	return tip, ok, nil
}

// MoveBranchTip implements loop.LandingStore.
func (s *MemStore) MoveBranchTip(ctx context.Context, branch, old, new string) (string, error) {
	if _, err := s.begin(ctx); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	if branch == "" || new == "" {
		return "", fmt.Errorf("looptest: branch tip %q of %q: both are required", new, branch)
	}
	if s.landings.tips == nil {
		s.landings.idx, s.landings.tips = map[[2]string]*loop.Landing{}, map[string]string{}
	}
	if s.landings.tips[branch] == old {
		s.landings.tips[branch] = new
	}
	return s.landings.tips[branch], nil
}

// AcceptTip implements loop.LandingStore.
func (s *MemStore) AcceptTip(ctx context.Context, p loop.AcceptTipParams) ([]string, error) {
	now, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if p.Branch == "" || p.Tip == "" {
		return nil, fmt.Errorf("looptest: accept tip %q of %q: both are required", p.Tip, p.Branch)
	}
	if s.landings.tips == nil {
		s.landings.idx, s.landings.tips = map[[2]string]*loop.Landing{}, map[string]string{}
	}
	s.landings.tips[p.Branch] = p.Tip
	var reopened []string
	reopen := func(mt *memTask, why string) {
		s.setStatus(now, mt, loop.StatusPending, loop.LogReopen, why, p.By.Name())
		reopened = append(reopened, mt.task.ID)
	}
	for _, c := range p.Drop {
		l := s.landings.get(p.Branch, c)
		if l == nil || l.State == loop.LandingDropped || l.State == loop.LandingVoid {
			continue
		}
		l.State, l.UpdatedAt = loop.LandingDropped, now
		mt := s.tasks[l.TaskID]
		if mt == nil || mt.task.Status != loop.StatusDone {
			continue
		}
		reopen(mt, p.Reason)
		for parent := mt.parent; parent != nil && parent.task.Status == loop.StatusDone; parent = parent.parent {
			reopen(parent, "subtask "+mt.task.ID+" reopened")
		}
	}
	return reopened, nil
}
