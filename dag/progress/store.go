package progress

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/safefile"
)

var (
	_ loop.TaskStore  = (*Store)(nil)
	_ loop.DoneMarker = (*Store)(nil)
)

// ErrFeatures: a Scope named a feature; a progress file has none.
var ErrFeatures = errors.New("progress: a progress file has no features")

// ErrConflict: the file kept changing under a write (someone else is
// writing it at the same time) and the write was given up.
var ErrConflict = errors.New("progress: the file changed during the write")

// ErrLostTasks: ReplaceDocument was given a document that drops boxes the
// file has.
var ErrLostTasks = errors.New("progress: the new document drops tasks")

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// Now is the clock for claims, leases and log entries (nil: time.Now).
	Now func() time.Time
	// Root is a trusted directory above the file (the project root): the
	// file and the directories between are read and replaced without
	// following a link (package safefile). Empty: the file's own
	// directory, and only a link at the file itself is refused.
	Root string
}

// Store is a loop.TaskStore over a progress file. The file is the truth
// for which tasks exist and which are done; claims, failures, retries,
// verdicts and task logs live in memory for the life of the Store (one
// run). See the package doc for the semantics.
//
// Every method is safe for concurrent use within one process; one mutex
// serialises them. Two processes driving the same file are not supported.
type Store struct {
	path   string
	abs    string // path, absolute
	base   string // the trusted directory above abs (Options.Root)
	now    func() time.Time
	rename func(d *safefile.Dir, oldname, newname string) error // (*safefile.Dir).Rename; tests inject failures
	// beforeCheck, if set, runs in write just before the file is read
	// again; tests use it to edit the file under a write.
	beforeCheck func()

	mu      sync.Mutex
	claims  map[string]claim
	failed  map[string]bool
	retries map[string]int
	gens    map[string]int64 // claims of each box so far (loop.Task.Generation)
	verdict map[string]string
	logs    map[string][]loop.LogEntry
	// iteration is the number of the last row AppendIteration wrote in
	// this run; Fail labels its Recent Attempts entry with iteration+1.
	iteration int

	// The file as the store last read or wrote it (known false: not
	// known), and parsed (nil until needed). A call whose file still holds
	// exactly cur uses doc instead of reading and parsing the file again.
	cur   string
	known bool
	doc   *Doc
	buf   []byte // for reading the file
}

type claim struct {
	agent   string
	at      time.Time
	expires time.Time
	holder  loop.Holder
	mode    loop.ClaimMode
}

// Open returns a Store over the progress file at path. The file must exist
// and parse; the errors wrap fs.ErrNotExist or ErrNotProgressFile.
func Open(path string, opt Options) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("progress: %w", err)
	}
	base := filepath.Dir(abs)
	if opt.Root != "" {
		if root, err := filepath.Abs(opt.Root); err == nil {
			base = safefile.Within(root, abs, base)
		}
	}
	s := &Store{
		path:    path,
		abs:     abs,
		base:    base,
		now:     opt.Now,
		rename:  (*safefile.Dir).Rename,
		claims:  map[string]claim{},
		failed:  map[string]bool{},
		retries: map[string]int{},
		gens:    map[string]int64{},
		verdict: map[string]string{},
		logs:    map[string][]loop.LogEntry{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if _, err := s.read(); err != nil {
		if errors.Is(err, safefile.ErrLink) {
			return nil, fmt.Errorf("%w; ralph follows no link an agent could have planted (give the file itself)", err)
		}
		return nil, err
	}
	return s, nil
}

// Path is the progress file's path.
func (s *Store) Path() string { return s.path }

// read returns the file parsed. It reads and parses the file only when it
// no longer holds what the store last read or wrote: deciding that reads
// the file through a small buffer and keeps no copy of it.
func (s *Store) read() (*Doc, error) {
	if s.buf == nil {
		s.buf = make([]byte, 256<<10)
	}
	if s.known {
		same, err := holds(s.base, s.abs, s.cur, s.buf)
		if err != nil {
			return nil, fmt.Errorf("progress: %w", err)
		}
		if same {
			if s.doc == nil {
				d, err := parse(s.cur, false)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", s.path, err)
				}
				s.doc = d
			}
			return s.doc, nil
		}
	}
	// Let the old content go before the new is read.
	s.cur, s.known, s.doc = "", false, nil
	src, err := readString(s.base, s.abs, s.buf)
	if err != nil {
		return nil, fmt.Errorf("progress: %w", err)
	}
	d, err := parse(src, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	s.cur, s.known, s.doc = src, true, d
	return d, nil
}

// remember records content as what the file holds, parsed as d (nil: to
// be parsed when needed).
func (s *Store) remember(content string, d *Doc) {
	s.cur, s.known, s.doc = content, true, d
}

// begin checks ctx, locks the store, reads the file and recovers expired
// claims. The caller must unlock s.mu.
func (s *Store) begin(ctx context.Context) (*Doc, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, time.Time{}, err
	}
	s.mu.Lock()
	d, err := s.read()
	if err != nil {
		s.mu.Unlock()
		return nil, time.Time{}, err
	}
	now := s.now()
	for id, c := range s.claims {
		it, ok := d.item(id)
		if !ok || it.Checked {
			continue // gone, or ticked by the agent: Complete settles it
		}
		switch {
		case !now.Before(c.expires):
			delete(s.claims, id)
			s.logLocked(now, id, loop.LogLeaseExpired, fmt.Sprintf("lease of %s expired at %s; returned to pending",
				c.agent, c.expires.UTC().Format(time.RFC3339)), loop.ActorRalph)
		case c.holder.Liveness() == loop.HolderGone:
			delete(s.claims, id)
			s.logLocked(now, id, loop.LogHolderGone, fmt.Sprintf("holder of %s's claim (%s) is gone; returned to pending",
				c.agent, c.holder), loop.ActorRalph)
		}
	}
	return d, now, nil
}

// write replaces the file with the result of change applied to d,
// atomically, when that differs from d's source. d is the Doc read
// returned. Just before the rename the file is compared with d's source;
// if it changed since, it is read again and change runs on the new content
// (up to three times, then ErrConflict). It returns the Doc change last ran
// on and what it returned, which the store then remembers as the file's
// content, to be parsed when next needed.
func (s *Store) write(d *Doc, change func(*Doc) (string, error)) (*Doc, string, error) {
	for range 3 {
		out, err := change(d)
		if err != nil || out == d.src {
			return d, out, err
		}
		if s.beforeCheck != nil {
			s.beforeCheck()
		}
		now, err := s.read()
		if err != nil {
			return nil, "", err
		}
		if now != d {
			d = now // the file changed under the write
			continue
		}
		if err := writeFile(s.base, s.abs, out, s.rename); err != nil {
			return nil, "", err
		}
		s.remember(out, nil)
		return d, out, nil
	}
	return nil, "", fmt.Errorf("%s: %w", s.path, ErrConflict)
}

func (s *Store) logLocked(now time.Time, id, kind, msg, actor string) {
	s.logs[id] = append(s.logs[id], loop.LogEntry{At: now, Kind: kind, Message: msg, Actor: actor})
}

// status is the status of item it: a ticked box is done; an unticked one
// is in_progress under a claim, failed if it failed in this run, else
// pending. A phase is done when all its boxes are ticked, else failed once
// one of its boxes failed in this run (until the phase is retried), else
// pending.
func (s *Store) status(d *Doc, it Item) loop.Status {
	if !it.Phase {
		switch {
		case s.hasClaim(it.ID):
			// A box the agent ticked is still its loop's claim: the loop
			// completes it after verification and gates.
			return loop.StatusInProgress
		case it.Checked:
			return loop.StatusDone
		case s.failed[it.ID]:
			return loop.StatusFailed
		}
		return loop.StatusPending
	}
	all := true
	for _, c := range d.Items {
		if c.Parent == it.ID && !c.Checked {
			all = false
			break
		}
	}
	switch {
	case all:
		return loop.StatusDone
	case s.failed[it.ID]:
		return loop.StatusFailed
	}
	return loop.StatusPending
}

// notReady says why box it cannot be claimed, or "" when it is ready.
func (s *Store) notReady(d *Doc, it Item) string {
	if it.Phase {
		n := 0
		for _, c := range d.Items {
			if c.Parent == it.ID {
				n++
			}
		}
		return fmt.Sprintf("it is a phase with %d child tasks; claim one of them", n)
	}
	if st := s.status(d, it); st != loop.StatusPending {
		return fmt.Sprintf("status is %s, not pending", st)
	}
	if it.Parent != "" && s.failed[it.Parent] {
		if p, ok := d.item(it.Parent); ok && s.status(d, p) == loop.StatusFailed {
			return fmt.Sprintf("parent %s is failed", it.Parent)
		}
	}
	return ""
}

func (s *Store) hasClaim(id string) bool {
	_, ok := s.claims[id]
	return ok
}

// task renders item it as a loop.Task.
func (s *Store) task(d *Doc, it Item) loop.Task {
	t := loop.Task{
		ID:                 it.ID,
		Title:              it.Title,
		Description:        it.Description,
		Status:             s.status(d, it),
		Priority:           2,
		ParentID:           it.Parent,
		RetryCount:         s.retries[it.ID],
		VerificationStatus: s.verdict[it.ID],
		Generation:         s.gens[it.ID],
	}
	if c, ok := s.claims[it.ID]; ok && t.Status == loop.StatusInProgress {
		t.ClaimedBy, t.ClaimedAt, t.LeaseExpiresAt = c.agent, c.at, c.expires
		t.Holder, t.ClaimMode = c.holder, c.mode
	}
	return t
}

func (s *Store) get(d *Doc, id string) (Item, error) {
	it, ok := d.item(id)
	if !ok {
		return Item{}, fmt.Errorf("progress: task %s: %w", id, loop.ErrNotFound)
	}
	return it, nil
}

// inScope lists the boxes in scope, in file order (without copying the
// list). A scope naming a phase holds its boxes; naming a box, that box.
func (s *Store) inScope(d *Doc, scope loop.Scope) (iter.Seq[Item], error) {
	if scope.Feature != "" {
		return nil, fmt.Errorf("progress: scope feature %q: %w", scope.Feature, ErrFeatures)
	}
	if scope.TaskID != "" {
		if _, err := s.get(d, scope.TaskID); err != nil {
			return nil, fmt.Errorf("progress: scope: %w", err)
		}
	}
	return func(yield func(Item) bool) {
		for _, it := range d.Items {
			if it.Phase || (scope.TaskID != "" && it.ID != scope.TaskID && it.Parent != scope.TaskID) {
				continue
			}
			if !yield(it) {
				return
			}
		}
	}, nil
}

// Get implements loop.TaskStore. Phases are tasks too (parents of their
// boxes).
func (s *Store) Get(ctx context.Context, id string) (loop.Task, error) {
	d, _, err := s.begin(ctx)
	if err != nil {
		return loop.Task{}, err
	}
	defer s.mu.Unlock()
	it, err := s.get(d, id)
	if err != nil {
		return loop.Task{}, err
	}
	return s.task(d, it), nil
}

// Ready implements loop.TaskStore: the unticked boxes that are neither
// claimed nor failed in this run and whose phase has not failed, in file
// order.
func (s *Store) Ready(ctx context.Context, scope loop.Scope, limit int) ([]loop.Task, error) {
	d, _, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	items, err := s.inScope(d, scope)
	if err != nil {
		return nil, err
	}
	var out []loop.Task
	for it := range items {
		if limit > 0 && len(out) == limit {
			break
		}
		if s.notReady(d, it) == "" {
			out = append(out, s.task(d, it))
		}
	}
	return out, nil
}

// Active implements loop.TaskStore.
func (s *Store) Active(ctx context.Context, scope loop.Scope) ([]loop.Task, error) {
	d, _, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	items, err := s.inScope(d, scope)
	if err != nil {
		return nil, err
	}
	var out []loop.Task
	for it := range items {
		if t := s.task(d, it); t.Status == loop.StatusInProgress {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b loop.Task) int { return a.ClaimedAt.Compare(b.ClaimedAt) })
	return out, nil
}

// Counts implements loop.TaskStore. It counts boxes only: phases are
// groupings, so "total" is the number of boxes and the plan is resolved
// exactly when every box is ticked or failed in this run.
func (s *Store) Counts(ctx context.Context, scope loop.Scope) (loop.Counts, error) {
	d, _, err := s.begin(ctx)
	if err != nil {
		return loop.Counts{}, err
	}
	defer s.mu.Unlock()
	items, err := s.inScope(d, scope)
	if err != nil {
		return loop.Counts{}, err
	}
	var c loop.Counts
	for it := range items {
		switch s.status(d, it) {
		case loop.StatusPending:
			c.Pending++
		case loop.StatusInProgress:
			c.InProgress++
		case loop.StatusDone:
			c.Done++
		case loop.StatusFailed:
			c.Failed++
		}
	}
	return c, nil
}

// Claim implements loop.TaskStore. The claim lives in memory only. Without
// a TaskID it takes the first unticked box in file order that is not
// claimed or failed. A named task that is not pending gives an error
// wrapping both loop.ErrNotReady and a *loop.TransitionError.
func (s *Store) Claim(ctx context.Context, p loop.ClaimParams) (loop.Task, error) {
	d, now, err := s.begin(ctx)
	if err != nil {
		return loop.Task{}, err
	}
	defer s.mu.Unlock()
	if p.Agent == "" {
		return loop.Task{}, errors.New("progress: claim: agent is required")
	}
	if p.Lease < 0 {
		return loop.Task{}, fmt.Errorf("progress: claim: negative lease %s", p.Lease)
	}
	if p.Lease == 0 {
		p.Lease = loop.DefaultLease
	}
	var it Item
	if p.TaskID == "" {
		items, err := s.inScope(d, p.Scope)
		if err != nil {
			return loop.Task{}, err
		}
		found := false
		for c := range items {
			if s.notReady(d, c) == "" {
				it, found = c, true
				break
			}
		}
		if !found {
			return loop.Task{}, fmt.Errorf("progress: claim: %w", loop.ErrNoReadyTask)
		}
	} else {
		if it, err = s.get(d, p.TaskID); err != nil {
			return loop.Task{}, err
		}
		if why := s.notReady(d, it); why != "" {
			if st := s.status(d, it); st != loop.StatusPending {
				return loop.Task{}, fmt.Errorf("progress: claim task %s: %s: %w: %w", it.ID, why,
					loop.ErrNotReady, &loop.TransitionError{TaskID: it.ID, From: st, To: loop.StatusInProgress})
			}
			return loop.Task{}, fmt.Errorf("progress: claim task %s: %s: %w", it.ID, why, loop.ErrNotReady)
		}
	}
	s.claims[it.ID] = claim{agent: p.Agent, at: now, expires: now.Add(p.Lease), holder: p.Holder, mode: p.Mode}
	s.gens[it.ID]++
	s.logLocked(now, it.ID, loop.LogClaim, loop.ClaimMessage(p, s.gens[it.ID]), p.Agent)
	return s.task(d, it), nil
}

// RenewLease implements loop.TaskStore.
func (s *Store) RenewLease(ctx context.Context, id, agent string, lease time.Duration) error {
	d, now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if lease < 0 {
		return fmt.Errorf("progress: renew lease of %s: negative lease %s", id, lease)
	}
	if lease == 0 {
		lease = loop.DefaultLease
	}
	it, err := s.get(d, id)
	if err != nil {
		return err
	}
	c, ok := s.claims[id]
	if !ok || c.agent != agent || s.status(d, it) != loop.StatusInProgress {
		return fmt.Errorf("progress: renew lease of %s for %s: %w", id, agent, loop.ErrNotHolder)
	}
	c.expires = now.Add(lease)
	s.claims[id] = c
	return nil
}

// MarkedDone implements loop.DoneMarker: the agent ticked the box of the
// task its loop claimed.
func (s *Store) MarkedDone(ctx context.Context, id string) (bool, error) {
	d, _, err := s.begin(ctx)
	if err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	it, err := s.get(d, id)
	if err != nil {
		return false, err
	}
	return !it.Phase && it.Checked && s.hasClaim(id), nil
}

// transition checks that by may make the move of kind on task id
// (loop.CheckMove) and that it is in_progress, the only status Complete,
// Fail and Release move a task from, and returns its item. A claimed box
// the agent ticked in the file is still in_progress (see status).
func (s *Store) transition(d *Doc, now time.Time, id string, kind loop.MoveKind, by loop.Actor, to loop.Status) (Item, error) {
	it, err := s.get(d, id)
	if err != nil {
		return Item{}, err
	}
	t := s.task(d, it)
	if err := s.checkMove(now, t, kind, by); err != nil {
		return Item{}, err
	}
	if t.Status != loop.StatusInProgress {
		return Item{}, &loop.TransitionError{TaskID: id, From: t.Status, To: to}
	}
	return it, nil
}

// checkMove applies loop.CheckMove, logging the refusal of a stale claim.
func (s *Store) checkMove(now time.Time, t loop.Task, kind loop.MoveKind, by loop.Actor) error {
	err := loop.CheckMove(t, kind, by, now)
	if err != nil && errors.Is(err, loop.ErrStaleClaim) {
		s.logLocked(now, t.ID, loop.LogOutcomeRefused, fmt.Sprintf("%s refused: %v", kind, err), by.Name())
	}
	if err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	return nil
}

// Complete implements loop.TaskStore: it ticks the box (an atomic write of
// the file; nothing if the agent ticked it already). Phases are done by
// themselves once their boxes are.
func (s *Store) Complete(ctx context.Context, p loop.MoveParams) error {
	id, summary := p.TaskID, p.Message
	d, now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := s.transition(d, now, id, loop.MoveComplete, p.By, loop.StatusDone); err != nil {
		return err
	}
	d, out, err := s.write(d, func(d *Doc) (string, error) { return d.tick(id) })
	if err != nil {
		return err
	}
	if s.doc == nil {
		d.ticked(id, out) // no need to parse the file again for one byte
		s.remember(out, d)
	}
	delete(s.claims, id)
	s.logLocked(now, id, loop.LogDone, summary, p.By.Name())
	return nil
}

// Fail implements loop.TaskStore: the box stays unticked but is not offered
// again in this run, and the failure is recorded in Recent Attempts (an
// atomic write; the oldest attempts past KeepAttempts are dropped). Its
// phase fails too, so the phase's other boxes are not offered either, as
// under a failed parent in the task graph.
func (s *Store) Fail(ctx context.Context, p loop.MoveParams) error {
	id, reason := p.TaskID, p.Message
	d, now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	it, err := s.transition(d, now, id, loop.MoveFail, p.By, loop.StatusFailed)
	if err != nil {
		return err
	}
	if reason == "" {
		reason = "failed"
	}
	a := Attempt{
		Iteration: s.iteration + 1,
		Tried:     it.Title + " (" + id + ")",
		Result:    "failed: " + reason,
		Next:      "not retried in this run; fix the cause or split the task, then run again",
	}
	if _, _, err := s.write(d, func(d *Doc) (string, error) { return d.addAttempt(a, KeepAttempts), nil }); err != nil {
		return err
	}
	delete(s.claims, id)
	s.failed[id] = true
	s.logLocked(now, id, loop.LogFail, reason, p.By.Name())
	if parent := it.Parent; parent != "" && !s.failed[parent] {
		s.failed[parent] = true
		s.logLocked(now, parent, loop.LogFail, "child task "+id+" failed", loop.ActorRalph)
	}
	return nil
}

// Release implements loop.TaskStore.
func (s *Store) Release(ctx context.Context, p loop.MoveParams) error {
	id, reason := p.TaskID, p.Message
	d, now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := s.transition(d, now, id, loop.MoveRelease, p.By, loop.StatusPending); err != nil {
		return err
	}
	if reason == "" {
		reason = "released"
	}
	delete(s.claims, id)
	s.logLocked(now, id, loop.LogRelease, reason, p.By.Name())
	return nil
}

// ReleaseAgent implements loop.TaskStore. The ids come in file order;
// claims on boxes that left the file are dropped without being listed.
func (s *Store) ReleaseAgent(ctx context.Context, agent, reason string) ([]string, error) {
	d, now, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if agent == "" {
		return nil, errors.New("progress: release agent: agent is required")
	}
	if reason == "" {
		reason = "released"
	}
	var ids []string
	for _, it := range d.Items {
		c, ok := s.claims[it.ID]
		if !ok || c.agent != agent || loop.LoopHeld(s.task(d, it)) {
			continue
		}
		if s.status(d, it) == loop.StatusInProgress {
			ids = append(ids, it.ID)
			s.logLocked(now, it.ID, loop.LogRelease, reason, agent)
		}
		delete(s.claims, it.ID)
	}
	for id, c := range s.claims {
		if _, ok := d.item(id); !ok && c.agent == agent {
			delete(s.claims, id) // a box that left the file
		}
	}
	return ids, nil
}

// Retry implements loop.TaskStore: an in_progress or failed box becomes
// pending (offered again) with RetryCount+1. Retrying a failed phase makes
// its pending boxes ready again; retrying a box leaves its phase failed.
func (s *Store) Retry(ctx context.Context, p loop.MoveParams) error {
	id, reason := p.TaskID, p.Message
	d, now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	it, err := s.get(d, id)
	if err != nil {
		return err
	}
	if err := s.checkMove(now, s.task(d, it), loop.MoveRetry, p.By); err != nil {
		return err
	}
	if st := s.status(d, it); st != loop.StatusInProgress && st != loop.StatusFailed {
		return &loop.TransitionError{TaskID: id, From: st, To: loop.StatusPending}
	}
	if reason == "" {
		reason = "retry"
	}
	delete(s.claims, id)
	delete(s.failed, id)
	s.retries[id]++
	s.logLocked(now, id, loop.LogRetry, reason, p.By.Name())
	return nil
}

// SetVerification implements loop.TaskStore. The verdict must be "pass",
// "fail" or "".
func (s *Store) SetVerification(ctx context.Context, id, verdict string) error {
	d, _, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := s.get(d, id); err != nil {
		return err
	}
	if verdict != "" && verdict != "pass" && verdict != "fail" {
		return fmt.Errorf("progress: task %s: verdict %q is not pass or fail", id, verdict)
	}
	s.verdict[id] = verdict
	return nil
}

// AddLog implements loop.TaskStore. The log lives in memory.
func (s *Store) AddLog(ctx context.Context, id, kind, message string) error {
	d, now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := s.get(d, id); err != nil {
		return err
	}
	if kind == "" {
		return fmt.Errorf("progress: task %s: log entry without a kind", id)
	}
	s.logLocked(now, id, kind, message, loop.ActorRalph)
	return nil
}

// Logs implements loop.TaskStore.
func (s *Store) Logs(ctx context.Context, id string) ([]loop.LogEntry, error) {
	d, _, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if _, err := s.get(d, id); err != nil {
		return nil, err
	}
	return slices.Clone(s.logs[id]), nil
}

// Done reports whether the run is over according to the file: RALPH_DONE
// alone on a line of the Status section, or at least one box and every
// box ticked. A file without boxes is not done: the loop reports it as an
// empty plan.
func (s *Store) Done(ctx context.Context) (bool, error) {
	d, _, err := s.begin(ctx)
	if err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	return d.Finished(), nil
}

// Doc returns the file as parsed now, as Parse reads it (Log included: the
// store itself does not read the log's rows). The Doc is the caller's.
func (s *Store) Doc(ctx context.Context) (*Doc, error) {
	d, _, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return parse(d.src, true)
}

// AppendIteration appends a row to the Iteration Log table (creating the
// table or section if missing) and trims Recent Attempts to the last
// KeepAttempts, in one atomic write. The row's number also labels the
// Recent Attempts entries Fail writes in the next iteration.
func (s *Store) AppendIteration(ctx context.Context, r IterationRow) error {
	d, _, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if r.Iteration < 1 {
		return fmt.Errorf("progress: iteration log row: iteration %d is not positive", r.Iteration)
	}
	if _, _, err := s.write(d, func(d *Doc) (string, error) { return d.logIteration(r, KeepAttempts), nil }); err != nil {
		return err
	}
	s.iteration = r.Iteration
	return nil
}

// AddAttempt appends a "### Iteration <n>" block at the bottom of Recent
// Attempts (creating the section if missing) and drops the oldest blocks
// at the top past KeepAttempts, in one atomic write.
func (s *Store) AddAttempt(ctx context.Context, a Attempt) error {
	d, _, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if a.Iteration < 1 {
		return fmt.Errorf("progress: attempt: iteration %d is not positive", a.Iteration)
	}
	_, _, err = s.write(d, func(d *Doc) (string, error) { return d.addAttempt(a, KeepAttempts), nil })
	return err
}

// ReplaceDocument replaces the whole file with text, an updated document
// the agent answered with. The text must parse as a progress file and keep
// every box the file has now (by id, ticked or not; new boxes may be
// added); otherwise it is rejected with an error naming what is wrong
// (wrapping ErrNotProgressFile or ErrLostTasks) and the file is untouched.
// The write is atomic; a final newline is added if missing.
func (s *Store) ReplaceDocument(ctx context.Context, text string) error {
	d, _, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	nd, err := parse(text, false)
	if err != nil {
		return fmt.Errorf("progress: replacement document: %w", err)
	}
	if err := keepsTasks(d, nd); err != nil {
		return err
	}
	_, out, err := s.write(d, func(cur *Doc) (string, error) {
		if err := keepsTasks(cur, nd); err != nil {
			return "", err
		}
		return text, nil
	})
	if err == nil && out == text {
		s.remember(text, nd)
	}
	return err
}

// keepsTasks checks that every box of old is in new.
func keepsTasks(old, new *Doc) error {
	var lost []string
	for _, it := range old.Items {
		if it.Phase {
			continue
		}
		if n, ok := new.item(it.ID); !ok || n.Phase {
			lost = append(lost, fmt.Sprintf("%q (line %d)", it.Title, it.Line))
		}
	}
	if len(lost) == 0 {
		return nil
	}
	more := ""
	if len(lost) > 3 {
		more = fmt.Sprintf(" and %d more", len(lost)-3)
		lost = lost[:3]
	}
	return fmt.Errorf("%w: %s%s", ErrLostTasks, strings.Join(lost, ", "), more)
}
