package dag

import (
	"context"
	"fmt"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// Recovery of the claims nobody keeps any more (ARCHITECTURE.md
// §2.2): a claim whose lease has expired, and a claim whose holder
// process ran on this host and is gone (a ralph that was killed). Every
// method recovers first: writes in their own transaction, reads only when a
// cheap look-up finds something to recover.

// holderCheckTTL is how long a holder process found alive is taken to be
// alive without looking at /proc again. A loop's own store claims and
// completes many times a minute; a holder that dies meanwhile is recovered
// at most this late by that process, and at once by any other.
const holderCheckTTL = time.Second

// orphanCheckEvery is how long a store that found no orphaned claim skips
// looking again. A process that starts (every `ralph task` call) looks at
// once; a long-lived one (a loop, a busy claimer) at most this late.
const orphanCheckEvery = 100 * time.Millisecond

// leaseLookFor is how long a look that found no expired claim stands for
// the reads of the store that made it (Store.Now's time), unless a lease
// it saw ends sooner. A claim made meanwhile elsewhere with a shorter
// lease is seen expired by those reads at most this late; writes and
// Recover always look.
const leaseLookFor = 100 * time.Millisecond

// holderCache remembers the holders found alive, and when; noneAt, when
// the last look found no orphaned claim; and, in the store's clock
// (Store.Now), from when until when no lease can have expired
// (leaseLook, leaseUntil: see leasesFresh).
type holderCache struct {
	alive                 map[loop.Holder]time.Time
	noneAt                time.Time
	leaseLook, leaseUntil int64
}

// leasesFresh reports whether a look a moment ago at now found that no
// lease expires before now.
func (s *Store) leasesFresh(now int64) bool {
	s.holderMu.Lock()
	defer s.holderMu.Unlock()
	return now >= s.holders.leaseLook && now < s.holders.leaseUntil
}

// sawLeases records a look at now that found first, the earliest lease
// of a claim (0: no claim): it stands for leaseLookFor, never past that
// lease.
func (s *Store) sawLeases(now, first int64) {
	until := now + int64(leaseLookFor)
	if first != 0 && first < until {
		until = first
	}
	s.holderMu.Lock()
	defer s.holderMu.Unlock()
	s.holders.leaseLook, s.holders.leaseUntil = now, until
}

// orphansFresh reports whether the store found no orphaned claim a moment
// ago; sawNone records such a look.
func (s *Store) orphansFresh() bool {
	s.holderMu.Lock()
	defer s.holderMu.Unlock()
	return time.Since(s.holders.noneAt) < orphanCheckEvery
}

func (s *Store) sawOrphans(n int) {
	s.holderMu.Lock()
	defer s.holderMu.Unlock()
	if n == 0 {
		s.holders.noneAt = time.Now()
	} else {
		s.holders.noneAt = time.Time{}
	}
}

// gone reports whether h, a holder on this host, is gone.
func (s *Store) holderGone(h loop.Holder) bool {
	s.holderMu.Lock()
	at, ok := s.holders.alive[h]
	s.holderMu.Unlock()
	if ok && time.Since(at) < holderCheckTTL {
		return false
	}
	switch h.Liveness() {
	case loop.HolderGone:
		return true
	case loop.HolderAlive:
		s.holderMu.Lock()
		if s.holders.alive == nil || len(s.holders.alive) > 1000 {
			s.holders.alive = map[loop.Holder]time.Time{}
		}
		s.holders.alive[h] = time.Now()
		s.holderMu.Unlock()
	}
	return false
}

// heldHereQuery lists the claims held by processes on this host.
const heldHereQuery = `SELECT id, claimed_by, holder_pid, holder_start FROM tasks INDEXED BY tasks_active
	WHERE status = 'in_progress' AND holder_host = ? AND holder_pid > 0 ORDER BY seq`

// orphan is a claim whose holder is gone.
type orphan struct {
	id, agent string
	holder    loop.Holder
}

// orphans reads the rows of heldHereQuery and keeps the claims whose holder
// is gone.
func (s *Store) orphans(rows rowSet) ([]orphan, error) {
	var out []orphan
	for rows.Next() {
		o := orphan{holder: loop.Holder{Host: loop.HostID()}}
		if err := rows.Scan(&o.id, &o.agent, &o.holder.PID, &o.holder.Start); err != nil {
			rows.Close()
			return nil, err
		}
		if s.holderGone(o.holder) {
			out = append(out, o)
		}
	}
	return out, rows.Close()
}

// recoverIfAny takes the write lock only when some claim needs recovering:
// cheap indexed look-ups keep reads from serialising behind writers. A
// look a moment ago that found nothing to recover stands (leasesFresh,
// orphansFresh): a read on a server pays a round trip for each look.
func (s *Store) recoverIfAny(ctx context.Context) error {
	need, err := s.needsRecovery(ctx, true)
	if err != nil || !need {
		return err
	}
	return s.write(ctx, func(*txn) error { return nil })
}

// needsRecovery reports whether some claim's lease has expired, or some
// claim's holder on this host is gone; recent: a look a moment ago at the
// leases stands.
func (s *Store) needsRecovery(ctx context.Context, recent bool) (bool, error) {
	if now := s.now(); !recent || !s.leasesFresh(now) {
		st, err := s.stmt(ctx, `SELECT coalesce(min(lease_expires_at), 0) FROM tasks INDEXED BY tasks_active
			WHERE status = 'in_progress'`)
		if err != nil {
			return false, s.dbErr(err)
		}
		var first int64
		if err := st.QueryRowContext(ctx).Scan(&first); err != nil {
			return false, s.dbErr(err)
		}
		if first != 0 && first <= now {
			return true, nil
		}
		s.sawLeases(now, first)
	}
	if s.orphansFresh() {
		return false, nil
	}
	st, err := s.stmt(ctx, heldHereQuery)
	if err != nil {
		return false, s.dbErr(err)
	}
	rows, err := st.QueryContext(ctx, loop.HostID())
	if err != nil {
		return false, s.dbErr(err)
	}
	gone, err := s.orphans(rows)
	if err == nil {
		s.sawOrphans(len(gone))
	}
	return len(gone) > 0, s.dbErr(err)
}

// Recover returns to pending every claim whose lease has expired (log kind
// loop.LogLeaseExpired) and every claim whose holder process ran on this
// host and is gone (loop.LogHolderGone), each entry naming the old holder,
// and returns the recovered ids. Every TaskStore method does this first.
// On a server, a recovery the server could not take is retried as writes
// are.
func (s *Store) Recover(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ids []string
	err := s.retrying(ctx, func() (committing bool, err error) {
		ids = nil
		// Nothing to recover (the usual case): no write lock, no
		// transaction.
		if need, err := s.needsRecovery(ctx, false); err != nil || !need {
			return false, err
		}
		t, end, err := s.begin(ctx, txOpts{})
		if err != nil {
			return false, err
		}
		defer end()
		found, err := t.recover()
		if err != nil {
			return false, s.dbErr(err)
		}
		if err := s.d.beforeCommit(t); err != nil {
			return false, s.dbErr(err)
		}
		if err := t.commit(); err != nil {
			if committing, err = s.commitFailed(ctx, t, err, nil); err != nil {
				return committing, err
			}
		}
		s.d.committed()
		ids = found
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// ensureRecovered recovers claims once in this transaction.
func (t *txn) ensureRecovered() error {
	if t.recovered {
		return nil
	}
	_, err := t.recover()
	return err
}

// leaseGuard returns a condition (with its argument) that holds when no
// claim's lease has expired, to be ANDed to the WHERE clause of the first
// statement of a writeGuarded transaction; it is empty once claims have
// been recovered. Claims whose holder is gone are recovered before that
// statement (recoverOrphans): no SQL condition can ask /proc.
func (t *txn) leaseGuard() (string, []any) {
	if t.recovered {
		return "", nil
	}
	return ` AND NOT EXISTS (SELECT 1 FROM tasks INDEXED BY tasks_active
		WHERE status = 'in_progress' AND lease_expires_at <= ?)`, []any{t.now}
}

// recover returns expired and orphaned claims to pending.
func (t *txn) recover() ([]string, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	t.recovered = true
	rows, err := t.query(`SELECT id, claimed_by, lease_expires_at FROM tasks INDEXED BY tasks_active
		WHERE status = 'in_progress' AND lease_expires_at <= ? ORDER BY seq`, t.now)
	if err != nil {
		return nil, err
	}
	type expired struct {
		id, agent string
		at        int64
	}
	var exp []expired
	for rows.Next() {
		var e expired
		if err := rows.Scan(&e.id, &e.agent, &e.at); err != nil {
			rows.Close()
			return nil, err
		}
		exp = append(exp, e)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range exp {
		msg := fmt.Sprintf("lease of %s expired at %s; returned to pending", e.agent, fromNanos(e.at).Format(time.RFC3339))
		if err := t.unclaim(e.id, loop.LogLeaseExpired, msg); err != nil {
			return nil, err
		}
		ids = append(ids, e.id)
	}
	more, err := t.recoverOrphans()
	return append(ids, more...), err
}

// recoverOrphans returns to pending the claims whose holder process ran on
// this host and is gone, once per transaction.
func (t *txn) recoverOrphans() ([]string, error) {
	if t.orphansDone || t.s.orphansFresh() {
		return nil, nil
	}
	t.orphansDone = true
	rows, err := t.query(heldHereQuery, loop.HostID())
	if err != nil {
		return nil, err
	}
	gone, err := t.s.orphans(rows)
	if err != nil {
		return nil, err
	}
	if len(gone) > 0 && (!t.locked || t.shared) {
		// On a server, a claim's transaction reads without the plan's
		// lock (a completion's holds its shared form): take it, and look
		// again under it.
		if err := t.lock(); err != nil {
			return nil, err
		}
		if rows, err = t.query(heldHereQuery, loop.HostID()); err != nil {
			return nil, err
		}
		if gone, err = t.s.orphans(rows); err != nil {
			return nil, err
		}
	}
	t.s.sawOrphans(len(gone))
	var ids []string
	for _, o := range gone {
		msg := fmt.Sprintf("holder of %s's claim (%s) is gone; returned to pending", o.agent, o.holder)
		if err := t.unclaim(o.id, loop.LogHolderGone, msg); err != nil {
			return nil, err
		}
		ids = append(ids, o.id)
	}
	return ids, nil
}

// unclaim returns in_progress task id to pending, logging kind and msg as
// ralph's own move.
func (t *txn) unclaim(id, kind, msg string) error {
	if err := t.setStatus(id, loop.StatusInProgress, loop.StatusPending); err != nil {
		return err
	}
	return t.logAs(id, kind, msg, loop.ActorRalph)
}
