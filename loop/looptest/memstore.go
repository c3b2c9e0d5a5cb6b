package looptest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

var (
	_ loop.TaskStore     = (*MemStore)(nil)
	_ loop.FeatureStore  = (*MemStore)(nil)
	_ loop.ReceiptStore  = (*MemStore)(nil)
	_ loop.ChangeWatcher = (*MemStore)(nil)
)

// MemStore is an in-memory loop.TaskStore, loop.FeatureStore,
// loop.ReceiptStore, loop.LandingStore and loop.RunRecorder with the semantics documented on
// loop.TaskStore and in ARCHITECTURE.md §2. It is meant for tests: it
// passes TestTaskStore, and a loop policy tested against it behaves the
// same against the SQLite store.
//
// Fill it with Add, AddDependency and AddFeature. Every method is safe for
// concurrent use; one mutex serialises them, so every method is atomic.
// Every method first returns expired claims to pending, logging a
// loop.LogLeaseExpired entry that names the old holder.
type MemStore struct {
	now func() time.Time

	mu       sync.Mutex
	seq      int64               // last insertion number handed out
	tasks    map[string]*memTask // by id
	order    []*memTask          // insertion order
	features map[string]loop.Feature
	// featureNames holds the features' names in the order they were added.
	featureNames []string
	receipts     []loop.Receipt // oldest first
	// landings are the integration branches' landings and tips
	// (loop.LandingStore).
	landings memLandings
	// runs are the run records (loop.RunRecorder), oldest first; a
	// run's ID is its index plus one.
	runs []loop.RunRecord

	// Indexes kept on every write (see memindex.go), so that reads and
	// claims do not scan the plan.
	ready   []*memTask            // the ready tasks, in claim order
	claimed map[*memTask]struct{} // the in_progress tasks
	counts  loop.Counts           // tasks by status

	// version counts the changes that can make work ready or end a wait
	// (status moves, new tasks, new dependencies); changed is closed and
	// replaced at each.
	version uint64
	changed chan struct{}
}

// memTask is a task with direct links to its neighbours and its readiness
// inputs.
type memTask struct {
	task       loop.Task
	seq        int64
	logs       []loop.LogEntry
	parent     *memTask
	children   []*memTask // insertion order
	blockers   []*memTask // task.BlockedBy, resolved
	dependents []*memTask // tasks this one blocks
	unmet      int        // blockers not done
	inReady    bool       // in MemStore.ready
	// chain counts the tasks on the longest path of what waits for this
	// one (dependents, parent), itself included; raced marks a task
	// released after it lost a race to land, until its next claim. Both
	// order the ready tasks (claimOrder), as dag's columns do.
	chain int
	raced bool
}

// NewMemStore returns an empty store whose clock is now (nil: time.Now).
// The clock stamps CreatedAt, UpdatedAt, claims, leases and log entries, and
// decides when leases expire; it never decides ready order, which is
// priority then insertion order.
func NewMemStore(now func() time.Time) *MemStore {
	if now == nil {
		now = time.Now
	}
	return &MemStore{
		now:      now,
		tasks:    make(map[string]*memTask),
		features: make(map[string]loop.Feature),
		claimed:  make(map[*memTask]struct{}),
		changed:  make(chan struct{}),
	}
}

// bumpLocked records a change for ChangeToken and WaitChange.
func (s *MemStore) bumpLocked() {
	s.version++
	close(s.changed)
	s.changed = make(chan struct{})
}

// ChangeToken implements loop.ChangeWatcher.
func (s *MemStore) ChangeToken(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatUint(s.version, 10), nil
}

// WaitChange implements loop.ChangeWatcher: it returns at the first status
// move, new task or new dependency after token was taken.
func (s *MemStore) WaitChange(ctx context.Context, token string, d time.Duration) (bool, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ch, now := s.changed, strconv.FormatUint(s.version, 10)
		s.mu.Unlock()
		if now != token {
			return true, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Add inserts tasks in the order given, all or nothing. Within one call,
// ParentID and BlockedBy may name tasks that come later in the list; across
// calls they must name tasks already in the store.
//
// Each task needs a unique ID. Status "" means pending; in_progress needs
// ClaimedBy (ClaimedAt defaults to now and LeaseExpiresAt to
// ClaimedAt+loop.DefaultLease), which makes Add a way to seed claims, even
// expired ones. Priority is used as is (the CLI's default of 2 is the
// caller's business). Zero CreatedAt and UpdatedAt become now. Parents and
// blockers must not form a cycle, and a feature, when named, need not exist.
// No auto-transition runs: the tasks are stored exactly as given.
func (s *MemStore) Add(tasks ...loop.Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.recoverLocked(now)
	return s.addLocked(now, tasks)
}

// addLocked is Add with s.mu held: the tasks are prepared one by one,
// their references and cycles checked against the store and each other,
// and only then stored and linked, so that a refused batch changes nothing.
func (s *MemStore) addLocked(now time.Time, tasks []loop.Task) error {
	batch := make(map[string]*loop.Task, len(tasks))
	prepared := make([]loop.Task, len(tasks))
	for i, t := range tasks {
		if err := s.prepareAdd(now, i, &t, batch); err != nil {
			return err
		}
		prepared[i] = t
		batch[t.ID] = &prepared[i]
	}
	if err := s.checkAddRefs(prepared, batch); err != nil {
		return err
	}
	if err := s.checkAddCycles(prepared, batch); err != nil {
		return err
	}
	s.linkAdded(prepared)
	return nil
}

// prepareAdd checks the i-th task of an Add (0-based) on its own — its id
// new to the store and to batch, its status known, a claim where it is
// in_progress — and fills the defaults Add documents.
func (s *MemStore) prepareAdd(now time.Time, i int, t *loop.Task, batch map[string]*loop.Task) error {
	t.BlockedBy = slices.Clone(t.BlockedBy)
	if t.Check == "" {
		t.CheckBy = "" // a mark of nothing (loop.NewTask.CheckBy)
	}
	if t.ID == "" {
		return fmt.Errorf("looptest: add task %d (%q): empty id", i+1, t.Title)
	}
	if _, ok := s.tasks[t.ID]; ok {
		return fmt.Errorf("looptest: add task %s: id already exists", t.ID)
	}
	if _, ok := batch[t.ID]; ok {
		return fmt.Errorf("looptest: add task %s: id given twice", t.ID)
	}
	if t.Status == "" {
		t.Status = loop.StatusPending
	}
	if !t.Status.Valid() {
		return fmt.Errorf("looptest: add task %s: unknown status %q", t.ID, t.Status)
	}
	if t.Status == loop.StatusInProgress {
		if t.ClaimedBy == "" {
			return fmt.Errorf("looptest: add task %s: in_progress needs ClaimedBy", t.ID)
		}
		if t.ClaimedAt.IsZero() {
			t.ClaimedAt = now
		}
		if t.LeaseExpiresAt.IsZero() {
			t.LeaseExpiresAt = t.ClaimedAt.Add(loop.DefaultLease)
		}
	} else {
		clearClaim(t)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = t.CreatedAt
	}
	return nil
}

// checkAddRefs checks that every parent and blocker of the prepared tasks
// is in the store or in the batch, and that no task blocks itself.
func (s *MemStore) checkAddRefs(prepared []loop.Task, batch map[string]*loop.Task) error {
	exists := func(id string) bool {
		_, old := s.tasks[id]
		_, fresh := batch[id]
		return old || fresh
	}
	for _, t := range prepared {
		if t.ParentID != "" && !exists(t.ParentID) {
			return fmt.Errorf("looptest: add task %s: parent %s: %w", t.ID, t.ParentID, loop.ErrNotFound)
		}
		for _, b := range t.BlockedBy {
			if b == t.ID {
				return fmt.Errorf("looptest: add task %s: blocked by itself", t.ID)
			}
			if !exists(b) {
				return fmt.Errorf("looptest: add task %s: blocker %s: %w", t.ID, b, loop.ErrNotFound)
			}
		}
	}
	return nil
}

// checkAddCycles refuses a batch whose parents and blockers would close a
// cycle in what waits for what, as dag does: a task waits for its
// blockers and for its children (a parent is done only when they are), so
// a child blocked by its own ancestor is a cycle too. Every cycle passes
// through an edge of the batch: a new task's blockers, or a new task's
// parent waiting for it; the walk starts at the new tasks and their
// parents.
func (s *MemStore) checkAddCycles(prepared []loop.Task, batch map[string]*loop.Task) error {
	newChildren := map[string][]string{}
	for _, t := range prepared {
		if t.ParentID != "" {
			newChildren[t.ParentID] = append(newChildren[t.ParentID], t.ID)
		}
	}
	edges := func(id string, visit func(string) bool) bool {
		t, ok := batch[id]
		if !ok {
			mt := s.tasks[id]
			t = &mt.task
			for _, c := range mt.children {
				if visit(c.task.ID) {
					return true
				}
			}
		}
		for _, c := range newChildren[id] {
			if visit(c) {
				return true
			}
		}
		for _, b := range t.BlockedBy {
			if visit(b) {
				return true
			}
		}
		return false
	}
	var starts []string
	for _, t := range prepared {
		starts = append(starts, t.ID)
		if t.ParentID != "" {
			starts = append(starts, t.ParentID)
		}
	}
	if path := findCycle(starts, edges); path != nil {
		return fmt.Errorf("looptest: add task %s: parents and blockers form a cycle %v", path[0], path)
	}
	return nil
}

// linkAdded stores the checked tasks in order and links each to its
// parent and blockers.
func (s *MemStore) linkAdded(prepared []loop.Task) {
	for _, t := range prepared {
		s.seq++
		mt := &memTask{task: t, seq: s.seq, chain: 1}
		s.tasks[t.ID] = mt
		s.order = append(s.order, mt)
	}
	for _, t := range prepared {
		mt := s.tasks[t.ID]
		if t.ParentID != "" {
			mt.parent = s.tasks[t.ParentID]
			mt.parent.children = append(mt.parent.children, mt)
		}
		for _, b := range t.BlockedBy {
			blocker := s.tasks[b]
			mt.blockers = append(mt.blockers, blocker)
			blocker.dependents = append(blocker.dependents, mt)
		}
	}
	// The new tasks' chains, and those of what they wait for (a blocker
	// of a new task has a new dependent).
	added := s.order[len(s.order)-len(prepared):]
	seeds := slices.Clone(added)
	for _, mt := range added {
		seeds = append(seeds, mt.blockers...)
	}
	s.updateChains(seeds...)
	s.indexAdded(added)
	s.bumpLocked()
}

// AddDependency makes blocked wait for blocker, like `ralph task dep add`.
// A dependency that would close a cycle (through blockers or parents) is
// refused and nothing changes; adding an existing dependency is a no-op.
// Errors: loop.ErrNotFound, a cycle error.
func (s *MemStore) AddDependency(ctx context.Context, blocked, blocker string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.recoverLocked(now)
	t, err := s.getLocked(blocked)
	if err != nil {
		return err
	}
	b, err := s.getLocked(blocker)
	if err != nil {
		return err
	}
	if blocked == blocker {
		return fmt.Errorf("looptest: task %s cannot block itself", blocked)
	}
	if slices.Contains(t.task.BlockedBy, blocker) {
		return nil
	}
	// What waits for what, as dag's cycle check: a task waits for its
	// blockers and its children.
	edges := func(id string, visit func(string) bool) bool {
		mt := s.tasks[id]
		if id == blocked && visit(blocker) {
			return true
		}
		for _, c := range mt.children {
			if visit(c.task.ID) {
				return true
			}
		}
		for _, b := range mt.blockers {
			if visit(b.task.ID) {
				return true
			}
		}
		return false
	}
	if path := findCycle([]string{blocked}, edges); path != nil {
		return fmt.Errorf("looptest: %s blocked by %s would form a cycle %v", blocked, blocker, path)
	}
	t.task.BlockedBy = append(t.task.BlockedBy, blocker)
	t.task.UpdatedAt = now
	t.blockers = append(t.blockers, b)
	b.dependents = append(b.dependents, t)
	s.updateChains(b)
	if b.task.Status != loop.StatusDone {
		t.unmet++
		s.refresh(t)
	}
	s.bumpLocked()
	return nil
}

// AddFeature records a feature. A zero CreatedAt becomes now. Adding a
// feature whose name exists is an error.
func (s *MemStore) AddFeature(f loop.Feature) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.recoverLocked(now)
	if f.Name == "" {
		return errors.New("looptest: add feature: empty name")
	}
	if _, ok := s.features[f.Name]; ok {
		return fmt.Errorf("looptest: add feature %s: already exists", f.Name)
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = now
	}
	s.features[f.Name] = f
	s.featureNames = append(s.featureNames, f.Name)
	return nil
}

// Tasks returns every task in insertion order, for assertions in tests.
func (s *MemStore) Tasks() []loop.Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recoverLocked(s.now())
	out := make([]loop.Task, len(s.order))
	for i, mt := range s.order {
		out[i] = mt.snapshot()
	}
	return out
}

// Block moves pending task p.TaskID to blocked, logging p.Message (if not
// empty) as loop.LogBlock, like `ralph task block`. Errors:
// loop.ErrNotFound, *loop.TransitionError.
func (s *MemStore) Block(ctx context.Context, p loop.MoveParams) error {
	return s.move(ctx, p, "", []loop.Status{loop.StatusPending}, loop.StatusBlocked, loop.LogBlock, nil)
}

// Unblock moves blocked task p.TaskID to pending, logging loop.LogUnblock
// (p.Message, or "unblocked"), like `ralph task unblock`. The task is ready
// again once its blockers are done. Errors: loop.ErrNotFound,
// *loop.TransitionError.
func (s *MemStore) Unblock(ctx context.Context, p loop.MoveParams) error {
	if p.Message == "" {
		p.Message = "unblocked"
	}
	return s.move(ctx, p, "", []loop.Status{loop.StatusBlocked}, loop.StatusPending, loop.LogUnblock, nil)
}

func (mt *memTask) snapshot() loop.Task {
	t := mt.task
	t.BlockedBy = slices.Clone(t.BlockedBy)
	return t
}

// begin checks ctx, locks the store and recovers expired claims. The caller
// must call s.mu.Unlock.
func (s *MemStore) begin(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	s.mu.Lock()
	now := s.now()
	s.recoverLocked(now)
	return now, nil
}

// recoverLocked returns to pending every in_progress task whose lease has
// run out (now at or past LeaseExpiresAt), and every one whose holder
// process ran on this host and is gone (loop.HolderGone).
func (s *MemStore) recoverLocked(now time.Time) {
	type lapsed struct {
		mt        *memTask
		kind, msg string
	}
	var out []lapsed
	for mt := range s.claimed {
		t := mt.task
		switch exp := t.LeaseExpiresAt; {
		case !exp.IsZero() && !now.Before(exp):
			out = append(out, lapsed{mt, loop.LogLeaseExpired, fmt.Sprintf("lease of %s expired at %s; returned to pending",
				t.ClaimedBy, exp.UTC().Format(time.RFC3339))})
		case t.Holder.Liveness() == loop.HolderGone:
			out = append(out, lapsed{mt, loop.LogHolderGone, fmt.Sprintf("holder of %s's claim (%s) is gone; returned to pending",
				t.ClaimedBy, t.Holder)})
		}
	}
	slices.SortFunc(out, func(a, b lapsed) int { return cmp.Compare(a.mt.seq, b.mt.seq) })
	for _, l := range out {
		s.setStatus(now, l.mt, loop.StatusPending, l.kind, l.msg, loop.ActorRalph)
	}
}

// clearClaim forgets a task's claim; its generation stays, so that the
// next claim gets the next number.
func clearClaim(t *loop.Task) {
	t.ClaimedBy, t.ClaimedAt, t.LeaseExpiresAt = "", time.Time{}, time.Time{}
	t.Holder, t.ClaimMode = loop.Holder{}, ""
}

func (s *MemStore) getLocked(id string) (*memTask, error) {
	mt, ok := s.tasks[id]
	if !ok {
		return nil, fmt.Errorf("looptest: task %s: %w", id, loop.ErrNotFound)
	}
	return mt, nil
}

// inScope reports whether t is in scope. With scope.TaskID naming a task
// that has children, its descendants are in scope (not the task itself);
// naming a leaf, the leaf alone.
func (s *MemStore) inScope(t *memTask, scope loop.Scope) bool {
	if scope.Feature != "" && t.task.Feature != scope.Feature {
		return false
	}
	if scope.TaskID == "" {
		return true
	}
	root := s.tasks[scope.TaskID]
	if len(root.children) == 0 {
		return t == root
	}
	for p := t.parent; p != nil; p = p.parent {
		if p == root {
			return true
		}
	}
	return false
}

func (s *MemStore) checkScope(scope loop.Scope) error {
	if scope.TaskID != "" {
		if _, err := s.getLocked(scope.TaskID); err != nil {
			return fmt.Errorf("looptest: scope: %w", err)
		}
	}
	return nil
}

// isReady reports whether t can be claimed.
func (s *MemStore) isReady(t *memTask) bool {
	if t.task.Status != loop.StatusPending || len(t.children) > 0 {
		return false
	}
	if t.parent != nil && t.parent.task.Status == loop.StatusFailed {
		return false
	}
	return t.unmet == 0
}

// notReady returns why t cannot be claimed, or "" when it is ready.
func (s *MemStore) notReady(t *memTask) string {
	if t.task.Status != loop.StatusPending {
		return fmt.Sprintf("status is %s, not pending", t.task.Status)
	}
	if n := len(t.children); n > 0 {
		return fmt.Sprintf("it has %d child tasks; claim a leaf", n)
	}
	if t.parent != nil && t.parent.task.Status == loop.StatusFailed {
		return fmt.Sprintf("parent %s is failed", t.parent.task.ID)
	}
	for _, b := range t.blockers {
		if st := b.task.Status; st != loop.StatusDone {
			return fmt.Sprintf("blocked by %s (%s)", b.task.ID, st)
		}
	}
	return ""
}

// readyLocked returns the ready tasks in scope in claim order, at most
// limit (<= 0: all).
func (s *MemStore) readyLocked(scope loop.Scope, limit int) []*memTask {
	var out []*memTask
	for _, mt := range s.ready {
		if limit > 0 && len(out) == limit {
			break
		}
		if s.inScope(mt, scope) {
			out = append(out, mt)
		}
	}
	return out
}

// Get implements loop.TaskStore.
func (s *MemStore) Get(ctx context.Context, id string) (loop.Task, error) {
	if _, err := s.begin(ctx); err != nil {
		return loop.Task{}, err
	}
	defer s.mu.Unlock()
	mt, err := s.getLocked(id)
	if err != nil {
		return loop.Task{}, err
	}
	return mt.snapshot(), nil
}

// Ready implements loop.TaskStore. A Scope naming an unknown task is an
// error wrapping loop.ErrNotFound.
func (s *MemStore) Ready(ctx context.Context, scope loop.Scope, limit int) ([]loop.Task, error) {
	if _, err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if err := s.checkScope(scope); err != nil {
		return nil, err
	}
	ready := s.readyLocked(scope, limit)
	out := make([]loop.Task, len(ready))
	for i, mt := range ready {
		out[i] = mt.snapshot()
	}
	return out, nil
}

// Active implements loop.TaskStore. Claims taken at the same instant come
// in insertion order.
func (s *MemStore) Active(ctx context.Context, scope loop.Scope) ([]loop.Task, error) {
	if _, err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if err := s.checkScope(scope); err != nil {
		return nil, err
	}
	var active []*memTask
	for mt := range s.claimed {
		if s.inScope(mt, scope) {
			active = append(active, mt)
		}
	}
	slices.SortFunc(active, func(a, b *memTask) int {
		if c := a.task.ClaimedAt.Compare(b.task.ClaimedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	out := make([]loop.Task, len(active))
	for i, mt := range active {
		out[i] = mt.snapshot()
	}
	return out, nil
}

// Counts implements loop.TaskStore.
func (s *MemStore) Counts(ctx context.Context, scope loop.Scope) (loop.Counts, error) {
	if _, err := s.begin(ctx); err != nil {
		return loop.Counts{}, err
	}
	defer s.mu.Unlock()
	if err := s.checkScope(scope); err != nil {
		return loop.Counts{}, err
	}
	if scope == (loop.Scope{}) {
		return s.counts, nil
	}
	var c loop.Counts
	for _, mt := range s.order {
		if s.inScope(mt, scope) {
			count(&c, mt.task.Status, 1)
		}
	}
	return c, nil
}

// Claim implements loop.TaskStore. A claim is logged as loop.LogClaim. A
// named task that is not pending gives an error that wraps both
// loop.ErrNotReady and a *loop.TransitionError. A negative lease is an
// error.
func (s *MemStore) Claim(ctx context.Context, p loop.ClaimParams) (loop.Task, error) {
	now, err := s.begin(ctx)
	if err != nil {
		return loop.Task{}, err
	}
	defer s.mu.Unlock()
	if p.Agent == "" {
		return loop.Task{}, errors.New("looptest: claim: agent is required")
	}
	if p.Lease < 0 {
		return loop.Task{}, fmt.Errorf("looptest: claim: negative lease %s", p.Lease)
	}
	if p.Lease == 0 {
		p.Lease = loop.DefaultLease
	}
	var mt *memTask
	if p.TaskID == "" {
		if err := s.checkScope(p.Scope); err != nil {
			return loop.Task{}, err
		}
		ready := s.readyLocked(p.Scope, 1)
		if len(ready) == 0 {
			return loop.Task{}, fmt.Errorf("looptest: claim: %w", loop.ErrNoReadyTask)
		}
		mt = ready[0]
	} else {
		if mt, err = s.getLocked(p.TaskID); err != nil {
			return loop.Task{}, err
		}
		if why := s.notReady(mt); why != "" {
			if st := mt.task.Status; st != loop.StatusPending {
				return loop.Task{}, fmt.Errorf("looptest: claim task %s: %s: %w: %w", p.TaskID, why, loop.ErrNotReady,
					&loop.TransitionError{TaskID: p.TaskID, From: st, To: loop.StatusInProgress})
			}
			return loop.Task{}, fmt.Errorf("looptest: claim task %s: %s: %w", p.TaskID, why, loop.ErrNotReady)
		}
	}
	s.setStatus(now, mt, loop.StatusInProgress, loop.LogClaim, loop.ClaimMessage(p, mt.task.Generation+1), p.Agent)
	mt.raced = false // out of the ready index now: no key to keep
	mt.task.ClaimedBy = p.Agent
	mt.task.ClaimedAt = now
	mt.task.LeaseExpiresAt = now.Add(p.Lease)
	mt.task.Holder, mt.task.ClaimMode = p.Holder, p.Mode
	mt.task.Generation++
	return mt.snapshot(), nil
}

// RenewLease implements loop.TaskStore. An unknown id is loop.ErrNotFound.
func (s *MemStore) RenewLease(ctx context.Context, id, agent string, lease time.Duration) error {
	now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if lease < 0 {
		return fmt.Errorf("looptest: renew lease of %s: negative lease %s", id, lease)
	}
	if lease == 0 {
		lease = loop.DefaultLease
	}
	mt, err := s.getLocked(id)
	if err != nil {
		return err
	}
	if mt.task.Status != loop.StatusInProgress || mt.task.ClaimedBy != agent {
		return fmt.Errorf("looptest: renew lease of %s for %s (status %s, held by %q): %w",
			id, agent, mt.task.Status, mt.task.ClaimedBy, loop.ErrNotHolder)
	}
	mt.task.LeaseExpiresAt = now.Add(lease)
	mt.task.UpdatedAt = now
	return nil
}

// move applies one explicit transition of task p.TaskID from one of the
// statuses from (the trigger's only legal sources) to status to, logging p.Message (if
// not empty) as kind; then, if not nil, after runs in the same critical
// section. A move of a claim (kind not "") must pass loop.CheckMove first;
// a refusal for a stale claim is logged.
func (s *MemStore) move(ctx context.Context, p loop.MoveParams, kind loop.MoveKind, from []loop.Status, to loop.Status, logKind string,
	after func(now time.Time, mt *memTask)) error {
	now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	mt, err := s.getLocked(p.TaskID)
	if err != nil {
		return err
	}
	if kind != "" {
		if err := loop.CheckMove(mt.snapshot(), kind, p.By, now); err != nil {
			if errors.Is(err, loop.ErrStaleClaim) {
				mt.logs = append(mt.logs, loop.LogEntry{At: now, Kind: loop.LogOutcomeRefused,
					Message: fmt.Sprintf("%s refused: %v", kind, err), Actor: p.By.Name()})
			}
			return fmt.Errorf("looptest: %w", err)
		}
	}
	// CanTransition alone is not enough: release and unblock both lead to
	// pending, but each only from its own status.
	if st := mt.task.Status; !slices.Contains(from, st) || !loop.CanTransition(st, to) {
		return &loop.TransitionError{TaskID: p.TaskID, From: st, To: to}
	}
	s.setStatus(now, mt, to, logKind, p.Message, p.By.Name())
	if after != nil {
		after(now, mt)
	}
	return nil
}

// setStatus moves mt to status without checking the machine: the callers
// are explicit moves already checked, and auto-transitions.
func (s *MemStore) setStatus(now time.Time, mt *memTask, to loop.Status, kind, message, actor string) {
	s.changeStatus(mt, to)
	s.bumpLocked()
	if to != loop.StatusInProgress {
		clearClaim(&mt.task)
	}
	mt.task.UpdatedAt = now
	if kind != "" {
		mt.logs = append(mt.logs, loop.LogEntry{At: now, Kind: kind, Message: message, Actor: actor})
	}
}

// Complete implements loop.TaskStore. Auto-transitions are logged on the
// tasks they move: loop.LogUnblock on a dependent, loop.LogDone on a parent.
func (s *MemStore) Complete(ctx context.Context, p loop.MoveParams) error {
	return s.move(ctx, p, loop.MoveComplete, []loop.Status{loop.StatusInProgress}, loop.StatusDone, loop.LogDone, s.cascadeDone)
}

// cascadeDone runs the auto-transitions caused by mt becoming done.
func (s *MemStore) cascadeDone(now time.Time, mt *memTask) {
	queue := []*memTask{mt}
	for len(queue) > 0 {
		done := queue[0]
		queue = queue[1:]
		for _, d := range done.dependents {
			if d.task.Status == loop.StatusBlocked && d.unmet == 0 {
				s.setStatus(now, d, loop.StatusPending, loop.LogUnblock, "all blockers done", loop.ActorRalph)
			}
		}
		parent := done.parent
		if parent == nil || parent.task.Status == loop.StatusDone || !childrenDone(parent) {
			continue
		}
		s.setStatus(now, parent, loop.StatusDone, loop.LogDone, "all child tasks done", loop.ActorRalph)
		queue = append(queue, parent)
	}
}

func childrenDone(mt *memTask) bool {
	for _, c := range mt.children {
		if c.task.Status != loop.StatusDone {
			return false
		}
	}
	return true
}

// Fail implements loop.TaskStore. Each ancestor that was not failed yet is
// failed with a loop.LogFail entry naming the task that failed.
func (s *MemStore) Fail(ctx context.Context, p loop.MoveParams) error {
	if p.Message == "" {
		p.Message = "failed"
	}
	return s.move(ctx, p, loop.MoveFail, []loop.Status{loop.StatusInProgress}, loop.StatusFailed, loop.LogFail, func(now time.Time, mt *memTask) {
		for parent := mt.parent; parent != nil; parent = parent.parent {
			if parent.task.Status != loop.StatusFailed {
				s.setStatus(now, parent, loop.StatusFailed, loop.LogFail, "child task "+mt.task.ID+" failed", loop.ActorRalph)
			}
		}
	})
}

// Release implements loop.TaskStore. An empty reason is logged as
// "released".
func (s *MemStore) Release(ctx context.Context, p loop.MoveParams) error {
	if p.Message == "" {
		p.Message = "released"
	}
	return s.move(ctx, p, loop.MoveRelease, []loop.Status{loop.StatusInProgress}, loop.StatusPending, loop.LogRelease,
		func(_ time.Time, mt *memTask) {
			if p.Raced {
				s.rekey(mt, func() { mt.raced = true })
			}
		})
}

// ReleaseAgent implements loop.TaskStore. The ids come in insertion order;
// an agent holding nothing gives none and no error. An empty agent is an
// error.
func (s *MemStore) ReleaseAgent(ctx context.Context, agent, reason string) ([]string, error) {
	now, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if agent == "" {
		return nil, errors.New("looptest: release agent: agent is required")
	}
	if reason == "" {
		reason = "released"
	}
	var held []*memTask
	for mt := range s.claimed {
		if mt.task.ClaimedBy == agent && !loop.LoopHeld(mt.task) {
			held = append(held, mt)
		}
	}
	slices.SortFunc(held, func(a, b *memTask) int { return cmp.Compare(a.seq, b.seq) })
	var ids []string
	for _, mt := range held {
		s.setStatus(now, mt, loop.StatusPending, loop.LogRelease, reason, agent)
		ids = append(ids, mt.task.ID)
	}
	return ids, nil
}

// Retry implements loop.TaskStore. An empty reason is logged as "retry".
func (s *MemStore) Retry(ctx context.Context, p loop.MoveParams) error {
	if p.Message == "" {
		p.Message = "retry"
	}
	return s.move(ctx, p, loop.MoveRetry, []loop.Status{loop.StatusInProgress, loop.StatusFailed}, loop.StatusPending, loop.LogRetry, func(_ time.Time, mt *memTask) {
		mt.task.RetryCount++
	})
}

// SetVerification implements loop.TaskStore. The verdict must be "pass",
// "fail" or "" (no verdict); anything else is an error.
func (s *MemStore) SetVerification(ctx context.Context, id, verdict string) error {
	now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	mt, err := s.getLocked(id)
	if err != nil {
		return err
	}
	if verdict != "" && verdict != "pass" && verdict != "fail" {
		return fmt.Errorf("looptest: task %s: verdict %q is not pass or fail", id, verdict)
	}
	mt.task.VerificationStatus = verdict
	mt.task.UpdatedAt = now
	return nil
}

// AddLog implements loop.TaskStore. An empty kind is an error.
func (s *MemStore) AddLog(ctx context.Context, id, kind, message string) error {
	now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	mt, err := s.getLocked(id)
	if err != nil {
		return err
	}
	if kind == "" {
		return fmt.Errorf("looptest: task %s: log entry without a kind", id)
	}
	mt.logs = append(mt.logs, loop.LogEntry{At: now, Kind: kind, Message: message, Actor: loop.ActorRalph})
	return nil
}

// Logs implements loop.TaskStore.
func (s *MemStore) Logs(ctx context.Context, id string) ([]loop.LogEntry, error) {
	if _, err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	mt, err := s.getLocked(id)
	if err != nil {
		return nil, err
	}
	return slices.Clone(mt.logs), nil
}

// Feature implements loop.FeatureStore.
func (s *MemStore) Feature(ctx context.Context, name string) (loop.Feature, error) {
	if _, err := s.begin(ctx); err != nil {
		return loop.Feature{}, err
	}
	defer s.mu.Unlock()
	f, ok := s.features[name]
	if !ok {
		return loop.Feature{}, fmt.Errorf("looptest: feature %s: %w", name, loop.ErrFeatureNotFound)
	}
	return f, nil
}

// Features implements loop.FeatureStore: every feature, in the order
// AddFeature added them.
func (s *MemStore) Features(ctx context.Context) ([]loop.Feature, error) {
	if _, err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]loop.Feature, 0, len(s.featureNames))
	for _, name := range s.featureNames {
		out = append(out, s.features[name])
	}
	return out, nil
}

// RecordReceipt implements loop.ReceiptStore.
func (s *MemStore) RecordReceipt(ctx context.Context, r loop.Receipt) error {
	if _, err := s.begin(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.receipts = append(s.receipts, r)
	return nil
}

// RecordResult implements loop.ResultStore.
func (s *MemStore) RecordResult(ctx context.Context, session, worker string, n int, status loop.IterationStatus) error {
	if _, err := s.begin(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for i, r := range s.receipts {
		if r.Session == session && r.Worker == worker && r.Iteration == n && r.Mode != string(loop.ModeVerify) {
			s.receipts[i].Result = status
		}
	}
	return nil
}

// Receipts implements loop.ReceiptStore: newest (last recorded) first.
func (s *MemStore) Receipts(ctx context.Context, limit int) ([]loop.Receipt, error) {
	if _, err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	n := len(s.receipts)
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]loop.Receipt, 0, n)
	for i := len(s.receipts) - 1; len(out) < n; i-- {
		out = append(out, s.receipts[i])
	}
	return out, nil
}
