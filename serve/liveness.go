package serve

import (
	"context"
	"slices"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// What changes with no write to the plan or its logs: a process on this
// host that holds a claim, or whose build writes a live session's event
// log, may die (SIGKILL, a crash); a claim's lease may run out. While such
// a process lives, the watcher looks at it every livenessEvery — a read of
// /proc, not of the store — and a lease is waited for with one timer. With
// no claim held and no build running, none of this runs.
const livenessEvery = 5 * time.Second

// lookouts is what the watcher keeps an eye on besides the files.
type lookouts struct {
	procs []loop.Holder // alive on this host
	lease time.Time     // the earliest lease still running; zero: none
}

// lookouts reads the claims' holders and leases, and the live sessions'
// build processes.
func (s *Server) lookouts(ctx context.Context) lookouts {
	now := s.cfg.Now()
	var l lookouts
	add := func(h loop.Holder) {
		if !slices.Contains(l.procs, h) && h.Liveness() == loop.HolderAlive {
			l.procs = append(l.procs, h)
		}
	}
	_ = s.cfg.Store.EachTask(ctx, dag.ListParams{Status: loop.StatusInProgress}, func(t loop.Task) error {
		add(t.Holder)
		if e := t.LeaseExpiresAt; e.After(now) && (l.lease.IsZero() || e.Before(l.lease)) {
			l.lease = e
		}
		return nil
	})
	s.runs.mu.Lock()
	for _, se := range s.runs.sessions {
		if se.live(now) {
			add(se.holder)
		}
	}
	s.runs.mu.Unlock()
	return l
}

// anyGone reports whether one of procs has died.
func anyGone(procs []loop.Holder) bool {
	return slices.ContainsFunc(procs, func(h loop.Holder) bool { return h.Liveness() == loop.HolderGone })
}

// deadSessions returns, once per session, the workers still shown of the
// sessions whose build's process is gone, each marked Ended: their `run`
// events take the cards of a killed build off the page.
func (s *Server) deadSessions() []*workerJSON {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	var out []*workerJSON
	for _, se := range s.runs.sessions {
		if se.deadSent || se.holder.Liveness() != loop.HolderGone {
			continue
		}
		se.deadSent = true
		for _, name := range se.order {
			if !se.ended[name] {
				w := *se.workers[name]
				w.Events, w.Ended = slices.Clone(w.Events), true
				out = append(out, &w)
			}
		}
	}
	return out
}

// lookout runs the watcher's liveness checks: rearm, after each change,
// sets its timers from the lookouts; C and Lease are the timers' channels
// (nil while off).
type lookout struct {
	s      *Server
	now    lookouts
	check  *time.Ticker
	lease  *time.Timer
	C      <-chan time.Time
	LeaseC <-chan time.Time
}

func (l *lookout) rearm(ctx context.Context) {
	l.now = l.s.lookouts(ctx)
	switch {
	case len(l.now.procs) > 0 && l.check == nil:
		l.check = time.NewTicker(livenessEvery)
		l.C = l.check.C
	case len(l.now.procs) == 0 && l.check != nil:
		l.check.Stop()
		l.check, l.C = nil, nil
	}
	if l.lease != nil {
		l.lease.Stop()
		l.lease, l.LeaseC = nil, nil
	}
	if !l.now.lease.IsZero() {
		l.lease = time.NewTimer(l.now.lease.Sub(l.s.cfg.Now()) + 10*time.Millisecond)
		l.LeaseC = l.lease.C
	}
}

func (l *lookout) stop() {
	if l.check != nil {
		l.check.Stop()
	}
	if l.lease != nil {
		l.lease.Stop()
	}
}
