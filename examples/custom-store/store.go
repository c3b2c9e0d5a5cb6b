// Package auditstore shows how to write a loop.TaskStore of your own. It
// wraps any other store and keeps an audit trail of every status change the
// loop makes, by embedding the inner store and overriding the methods that
// move tasks. Its test runs the one conformance suite every TaskStore must
// pass (looptest.TestTaskStore), so a custom store is held to the same
// contract as the SQLite one.
//
// A store written from scratch (over a REST API, a YAML file, an issue
// tracker) does the same: implement loop.TaskStore, then run
// looptest.TestTaskStore against it, with options such as
// looptest.WithoutDependencies for what it cannot model.
package auditstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/ralph-dev/ralph/loop"
)

// Store is a loop.TaskStore that records every change it passes on.
type Store struct {
	loop.TaskStore

	mu    sync.Mutex
	trail []string
}

var _ loop.TaskStore = (*Store)(nil)

// New wraps inner.
func New(inner loop.TaskStore) *Store { return &Store{TaskStore: inner} }

// Trail returns the audit trail, oldest first.
func (s *Store) Trail() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.trail...)
}

func (s *Store) record(err error, format string, args ...any) error {
	if err == nil {
		s.mu.Lock()
		s.trail = append(s.trail, fmt.Sprintf(format, args...))
		s.mu.Unlock()
	}
	return err
}

// Claim records which agent took which task.
func (s *Store) Claim(ctx context.Context, p loop.ClaimParams) (loop.Task, error) {
	t, err := s.TaskStore.Claim(ctx, p)
	return t, s.record(err, "%s claimed %s", p.Agent, t.ID)
}

// Complete records a completion.
func (s *Store) Complete(ctx context.Context, p loop.MoveParams) error {
	return s.record(s.TaskStore.Complete(ctx, p), "%s done by %s", p.TaskID, p.By.Name())
}

// Fail records a failure.
func (s *Store) Fail(ctx context.Context, p loop.MoveParams) error {
	return s.record(s.TaskStore.Fail(ctx, p), "%s failed by %s: %s", p.TaskID, p.By.Name(), p.Message)
}

// Release records a release.
func (s *Store) Release(ctx context.Context, p loop.MoveParams) error {
	return s.record(s.TaskStore.Release(ctx, p), "%s released by %s: %s", p.TaskID, p.By.Name(), p.Message)
}

// Retry records a retry.
func (s *Store) Retry(ctx context.Context, p loop.MoveParams) error {
	return s.record(s.TaskStore.Retry(ctx, p), "%s retried by %s: %s", p.TaskID, p.By.Name(), p.Message)
}
