package looptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ralph-dev/ralph/loop"
)

// Seed is one task to put in a store before a conformance subtest runs.
type Seed struct {
	ID          string
	Title       string
	Description string
	Priority    int // used as is (the suite always sets it)
	ParentID    string
	Feature     string
	BlockedBy   []string    // may point forward within the seed list
	Status      loop.Status // pending, done, failed or blocked ("" = pending)
	Check       string      // the task's check command (loop.Task.Check)
	CheckBy     string      // the agent that wrote it (loop.Task.CheckBy)
}

// Task returns the seed as a loop.Task, with Status "" made pending. The
// store sets the rest (times, claim, retry count).
func (s Seed) Task() loop.Task {
	st := s.Status
	if st == "" {
		st = loop.StatusPending
	}
	return loop.Task{
		ID:          s.ID,
		Title:       s.Title,
		Description: s.Description,
		Status:      st,
		Priority:    s.Priority,
		ParentID:    s.ParentID,
		Feature:     s.Feature,
		BlockedBy:   slices.Clone(s.BlockedBy),
		Check:       s.Check,
		CheckBy:     s.CheckBy,
	}
}

// StoreFactory returns a fresh store holding exactly seeds, inserted in
// order, whose clock is now. The factory creates any feature a seed names,
// and closes the store when the test ends (t.Cleanup). It fails t if it
// cannot build the store.
type StoreFactory func(t *testing.T, seeds []Seed, now func() time.Time) loop.TaskStore

// Option declares something a store cannot do, so that TestTaskStore skips
// exactly the subtests (or cases) that need it, naming the reason.
type Option func(*suite)

// WithoutDependencies declares a store with no blockers: the suite seeds no
// BlockedBy and no blocked status, and skips the tests of blocker gating and
// unblocking.
func WithoutDependencies() Option { return func(s *suite) { s.noDeps = true } }

// WithoutLeases declares a store whose claims never expire: the suite skips
// lease expiry and renewal, and does not check LeaseExpiresAt.
func WithoutLeases() Option { return func(s *suite) { s.noLeases = true } }

// WithoutPriorities declares a store that orders ready tasks by insertion
// alone: every seed then gets priority 2, and the priority ordering checks
// are skipped (insertion order is still checked).
func WithoutPriorities() Option { return func(s *suite) { s.noPriorities = true } }

// WithoutFeatures declares a store with no features: the suite seeds no
// Feature and skips scope by feature.
func WithoutFeatures() Option { return func(s *suite) { s.noFeatures = true } }

// WithoutChecks declares a store that keeps no per-task check
// (loop.Task.Check): the suite seeds none and skips the test of checks.
func WithoutChecks() Option { return func(s *suite) { s.noChecks = true } }

// WithoutNesting declares a store whose parents cannot themselves have a
// parent (one level, like a progress file's phases): the suite skips the
// cases that need grandchildren.
func WithoutNesting() Option { return func(s *suite) { s.noNesting = true } }

type suite struct {
	newStore     StoreFactory
	noDeps       bool
	noLeases     bool
	noPriorities bool
	noFeatures   bool
	noNesting    bool
	noChecks     bool
}

// suiteStart is where the suite's clock starts. Times in the suite are
// whole seconds, so a store that keeps second precision passes.
var suiteStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestTaskStore runs the conformance subtests against stores from newStore.
// Each subtest builds its own store. The suite checks only the contract
// documented on loop.TaskStore and in ARCHITECTURE.md §2; options declare
// what a store cannot do.
//
// Beyond the letter of loop.TaskStore, the suite expects: errors about a
// task name its id; ErrNotReady messages name the reason — the status when
// the task is not pending, the word "child" when it has children, the
// failed parent's id, the unfinished blocker's id; Release, Retry, Fail and
// Complete log exactly the reason or summary given as the message of their
// entry; the lease-expired entry's message names the old holder; an expired
// claim is recovered at the latest by the next Claim, which recovers every
// expired claim; a claim whose holder is gone on this host
// (ARCHITECTURE.md §2.2) is recovered by the next call of any method, with a
// loop.LogHolderGone entry naming the holder; every history entry names its
// actor (the agent, the person of loop.Actor.Name, or loop.ActorRalph for
// recoveries and auto-transitions).
func TestTaskStore(t *testing.T, newStore StoreFactory, opts ...Option) {
	t.Helper()
	s := &suite{newStore: newStore}
	for _, o := range opts {
		o(s)
	}
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"Get", s.testGet},
		{"NotFound", s.testNotFound},
		{"ReadyOrder", s.testReadyOrder},
		{"CriticalPathFirst", s.testCriticalPath},
		{"BlockerGating", s.testBlockerGating},
		{"CompleteUnblocksDependents", s.testCompleteUnblocks},
		{"ParentNotReady", s.testParentNotReady},
		{"FailedParentHidesChildren", s.testFailedParent},
		{"Claim", s.testClaim},
		{"ParentDoneRecursively", s.testParentDone},
		{"FailAncestorsRecursively", s.testFailAncestors},
		{"ReleaseAndRetry", s.testReleaseRetry},
		{"IllegalTransitions", s.testIllegalTransitions},
		{"RenewLease", s.testRenewLease},
		{"LeaseExpiry", s.testLeaseExpiry},
		{"ReleaseAgent", s.testReleaseAgent},
		{"Active", s.testActive},
		{"Counts", s.testCounts},
		{"ScopeFeature", s.testScopeFeature},
		{"ScopeTask", s.testScopeTask},
		{"Logs", s.testLogs},
		{"SetVerification", s.testVerification},
		{"ConcurrentClaims", s.testConcurrentClaims},
		{"ConcurrentClaimByID", s.testConcurrentClaimByID},
		{"CancelledContext", s.testCancelled},
		{"ClaimRecordsHolder", s.testClaimRecordsHolder},
		{"WhoMayMove", s.testWhoMayMove},
		{"StaleClaimRefused", s.testStaleClaim},
		{"HolderGone", s.testHolderGone},
		{"History", s.testHistory},
		{"Checks", s.testChecks},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// fixture is one store under test with the suite's clock.
type fixture struct {
	t     *testing.T
	store loop.TaskStore
	clock *Clock
	ids   []string
}

func (s *suite) open(t *testing.T, seeds []Seed) *fixture {
	t.Helper()
	clock := NewClock(suiteStart)
	ids := make([]string, len(seeds))
	for i, sd := range seeds {
		ids[i] = sd.ID
	}
	st := s.newStore(t, slices.Clone(seeds), clock.Now)
	if st == nil {
		t.Fatal("looptest: StoreFactory returned a nil store")
	}
	return &fixture{t: t, store: st, clock: clock, ids: ids}
}

// p is the priority to seed: as given, or 2 for a store without priorities.
func (s *suite) p(prio int) int {
	if s.noPriorities {
		return 2
	}
	return prio
}

// seed builds a pending seed with priority 2 in the store's terms.
func (s *suite) seed(id string) Seed { return Seed{ID: id, Title: "task " + id, Priority: 2} }

func (s *suite) child(id, parent string) Seed {
	sd := s.seed(id)
	sd.ParentID = parent
	return sd
}

func (s *suite) needDeps(t *testing.T) {
	t.Helper()
	if s.noDeps {
		t.Skip("looptest: skipped: the store declared WithoutDependencies (no blockers, no blocked status)")
	}
}

func (s *suite) needLeases(t *testing.T) {
	t.Helper()
	if s.noLeases {
		t.Skip("looptest: skipped: the store declared WithoutLeases (claims never expire)")
	}
}

func (s *suite) needFeatures(t *testing.T) {
	t.Helper()
	if s.noFeatures {
		t.Skip("looptest: skipped: the store declared WithoutFeatures")
	}
}

func (s *suite) needNesting(t *testing.T) {
	t.Helper()
	if s.noNesting {
		t.Skip("looptest: skipped: the store declared WithoutNesting (no grandchildren)")
	}
}

// taskState is one task and its log, for before/after comparisons.
type taskState struct {
	Task loop.Task
	Logs []loop.LogEntry
}

var cmpOpts = cmp.Options{cmpopts.EquateEmpty()}

func (f *fixture) get(id string) loop.Task {
	f.t.Helper()
	task, err := f.store.Get(f.t.Context(), id)
	if err != nil {
		f.t.Fatalf("Get(%s): %v", id, err)
	}
	return task
}

func (f *fixture) logs(id string) []loop.LogEntry {
	f.t.Helper()
	logs, err := f.store.Logs(f.t.Context(), id)
	if err != nil {
		f.t.Fatalf("Logs(%s): %v", id, err)
	}
	return logs
}

// snapshot reads every seeded task and its log.
func (f *fixture) snapshot() []taskState {
	f.t.Helper()
	out := make([]taskState, len(f.ids))
	for i, id := range f.ids {
		out[i] = taskState{Task: f.get(id), Logs: f.logs(id)}
	}
	return out
}

// unchanged fails the test if the store differs from before.
func (f *fixture) unchanged(before []taskState, what string) {
	f.t.Helper()
	if diff := cmp.Diff(before, f.snapshot(), cmpOpts); diff != "" {
		f.t.Errorf("%s changed the store (-before +after):\n%s", what, diff)
	}
}

// statuses returns the status of each seeded task.
func (f *fixture) statuses() map[string]loop.Status {
	f.t.Helper()
	out := make(map[string]loop.Status, len(f.ids))
	for _, id := range f.ids {
		out[id] = f.get(id).Status
	}
	return out
}

// wantStatuses checks the status of every seeded task: those named in
// changed have the given status, the others the status of base.
func (f *fixture) wantStatuses(base map[string]loop.Status, changed map[string]loop.Status, when string) {
	f.t.Helper()
	want := make(map[string]loop.Status, len(base))
	for id, st := range base {
		want[id] = st
	}
	for id, st := range changed {
		want[id] = st
	}
	if diff := cmp.Diff(want, f.statuses()); diff != "" {
		f.t.Errorf("statuses %s (-want +got):\n%s", when, diff)
	}
}

func (f *fixture) ready(scope loop.Scope, limit int) []string {
	f.t.Helper()
	tasks, err := f.store.Ready(f.t.Context(), scope, limit)
	if err != nil {
		f.t.Fatalf("Ready(%+v, %d): %v", scope, limit, err)
	}
	return taskIDs(tasks)
}

func (f *fixture) wantReady(scope loop.Scope, want []string, when string) {
	f.t.Helper()
	if diff := cmp.Diff(want, f.ready(scope, 0), cmpOpts); diff != "" {
		f.t.Errorf("Ready(%+v) %s (-want +got):\n%s", scope, when, diff)
	}
}

func (f *fixture) claim(id, agent string) loop.Task {
	f.t.Helper()
	task, err := f.store.Claim(f.t.Context(), loop.ClaimParams{TaskID: id, Agent: agent})
	if err != nil {
		f.t.Fatalf("Claim(%q, %s): %v", id, agent, err)
	}
	return task
}

func (f *fixture) must(err error, what string) {
	f.t.Helper()
	if err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
}

// lastLog returns the latest entry of a task's log.
func (f *fixture) lastLog(id string) loop.LogEntry {
	f.t.Helper()
	logs := f.logs(id)
	if len(logs) == 0 {
		f.t.Fatalf("Logs(%s) is empty", id)
	}
	return logs[len(logs)-1]
}

func (f *fixture) wantLastLog(id string, want loop.LogEntry) {
	f.t.Helper()
	if diff := cmp.Diff(want, f.lastLog(id)); diff != "" {
		f.t.Errorf("latest log entry of %s (-want +got):\n%s", id, diff)
	}
}

func taskIDs(tasks []loop.Task) []string {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return ids
}

// wantErr fails unless err matches target (errors.Is).
func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error = %v, want %v", what, err, target)
	}
}

// wantTransitionError fails unless err is a *loop.TransitionError for id
// from -> to.
func wantTransitionError(t *testing.T, err error, id string, from, to loop.Status, what string) {
	t.Helper()
	var te *loop.TransitionError
	if !errors.As(err, &te) {
		t.Errorf("%s: error = %v, want a *loop.TransitionError", what, err)
		return
	}
	want := loop.TransitionError{TaskID: id, From: from, To: to}
	if diff := cmp.Diff(want, *te); diff != "" {
		t.Errorf("%s: TransitionError (-want +got):\n%s", what, diff)
	}
}

// view is the part of a task that seeding and the status machine decide.
type view struct {
	ID, Title, Description string
	Status                 loop.Status
	Priority               int
	ParentID, Feature      string
	BlockedBy              []string
	ClaimedBy              string
	RetryCount             int
}

func viewOf(t loop.Task) view {
	return view{t.ID, t.Title, t.Description, t.Status, t.Priority, t.ParentID, t.Feature, t.BlockedBy, t.ClaimedBy, t.RetryCount}
}

func (s *suite) testGet(t *testing.T) {
	full := Seed{ID: "full", Title: "Fix login", Description: "The form\nposts twice.", Priority: s.p(1), ParentID: "parent"}
	seeds := []Seed{s.seed("parent"), full, s.seed("other")}
	if !s.noDeps {
		seeds[1].BlockedBy = []string{"later", "other"}
		seeds = append(seeds, s.seed("later"))
	}
	if !s.noFeatures {
		seeds[1].Feature = "auth"
	}
	f := s.open(t, seeds)
	for _, sd := range seeds {
		t.Run(sd.ID, func(t *testing.T) {
			got := f.get(sd.ID)
			want := viewOf(sd.Task())
			if diff := cmp.Diff(want, viewOf(got), cmpOpts); diff != "" {
				t.Errorf("Get(%s) (-want +got):\n%s", sd.ID, diff)
			}
			if !got.ClaimedAt.IsZero() || !got.LeaseExpiresAt.IsZero() {
				t.Errorf("Get(%s): unclaimed task has ClaimedAt %v, LeaseExpiresAt %v", sd.ID, got.ClaimedAt, got.LeaseExpiresAt)
			}
		})
	}
}

func (s *suite) testNotFound(t *testing.T) {
	f := s.open(t, []Seed{s.seed("t1")})
	f.claim("t1", "agent-a")
	before := f.snapshot()
	ctx := t.Context()
	const id = "no-such-task"
	calls := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := f.store.Get(ctx, id); return err }},
		{"Claim", func() error {
			_, err := f.store.Claim(ctx, loop.ClaimParams{TaskID: id, Agent: "agent-a"})
			return err
		}},
		{"Complete", func() error { return f.store.Complete(ctx, loop.MoveParams{TaskID: id, Message: "done"}) }},
		{"Fail", func() error { return f.store.Fail(ctx, loop.MoveParams{TaskID: id, Message: "boom"}) }},
		{"Release", func() error { return f.store.Release(ctx, loop.MoveParams{TaskID: id, Message: "later"}) }},
		{"Retry", func() error { return f.store.Retry(ctx, loop.MoveParams{TaskID: id, Message: "again"}) }},
		{"SetVerification", func() error { return f.store.SetVerification(ctx, id, "pass") }},
		{"AddLog", func() error { return f.store.AddLog(ctx, id, loop.LogNote, "hi") }},
		{"Logs", func() error { _, err := f.store.Logs(ctx, id); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			wantErr(t, err, loop.ErrNotFound, c.name)
			if err != nil && !strings.Contains(err.Error(), id) {
				t.Errorf("%s: error %q does not name the id %s", c.name, err, id)
			}
		})
	}
	t.Run("RenewLease", func(t *testing.T) {
		err := f.store.RenewLease(ctx, id, "agent-a", time.Minute)
		if !errors.Is(err, loop.ErrNotFound) && !errors.Is(err, loop.ErrNotHolder) {
			t.Errorf("RenewLease: error = %v, want ErrNotFound or ErrNotHolder", err)
		}
	})
	f.unchanged(before, "calls naming an unknown task")
}

// readyOrderSeeds returns n tasks whose ids sort differently from their
// insertion order, with repeating priorities, and the claim order.
func (s *suite) readyOrderSeeds(n int) ([]Seed, []string) {
	seeds := make([]Seed, n)
	for i := range seeds {
		// 37 is coprime with n for the sizes used: ids are a permutation.
		seeds[i] = s.seed(fmt.Sprintf("t%02d", (i*37+11)%n))
		seeds[i].Priority = s.p([]int{2, 1, 3, 2, 0, 1}[i%6])
	}
	sorted := slices.Clone(seeds)
	slices.SortStableFunc(sorted, func(a, b Seed) int { return a.Priority - b.Priority })
	want := make([]string, n)
	for i, sd := range sorted {
		want[i] = sd.ID
	}
	return seeds, want
}

func (s *suite) testReadyOrder(t *testing.T) {
	const n = 40
	t.Run("Ready", func(t *testing.T) {
		seeds, want := s.readyOrderSeeds(n)
		f := s.open(t, seeds)
		if diff := cmp.Diff(want, f.ready(loop.Scope{}, 0)); diff != "" {
			t.Errorf("Ready (priority, then insertion order) (-want +got):\n%s", diff)
		}
		for _, limit := range []int{1, 7, n, n + 5, -1} {
			w := want
			if limit > 0 && limit < n {
				w = want[:limit]
			}
			if diff := cmp.Diff(w, f.ready(loop.Scope{}, limit)); diff != "" {
				t.Errorf("Ready limit %d (-want +got):\n%s", limit, diff)
			}
		}
	})
	t.Run("ClaimNext", func(t *testing.T) {
		seeds, want := s.readyOrderSeeds(n)
		f := s.open(t, seeds)
		var got []string
		for range n {
			got = append(got, f.claim("", "agent-a").ID)
			f.clock.Advance(time.Second)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("claim order (-want +got):\n%s", diff)
		}
		_, err := f.store.Claim(t.Context(), loop.ClaimParams{Agent: "agent-a"})
		wantErr(t, err, loop.ErrNoReadyTask, "Claim with everything claimed")
	})
	t.Run("EqualPriorities", func(t *testing.T) {
		seeds := make([]Seed, n)
		want := make([]string, n)
		for i := range seeds {
			seeds[i] = s.seed(fmt.Sprintf("z%02d", n-i)) // ids descending
			want[i] = seeds[i].ID
		}
		f := s.open(t, seeds)
		if diff := cmp.Diff(want, f.ready(loop.Scope{}, 0)); diff != "" {
			t.Errorf("Ready with equal priorities is not insertion order (-want +got):\n%s", diff)
		}
	})
}

func (s *suite) testBlockerGating(t *testing.T) {
	s.needDeps(t)
	seeds := []Seed{
		{ID: "waits-later", Title: "blocked by a later pending task", Priority: s.p(0), BlockedBy: []string{"open"}},
		s.seed("open"),
		{ID: "done", Title: "done", Priority: 2, Status: loop.StatusDone},
		{ID: "failed", Title: "failed", Priority: 2, Status: loop.StatusFailed},
		{ID: "after-done", Title: "blocked by a done task", Priority: 2, BlockedBy: []string{"done"}},
		{ID: "after-failed", Title: "blocked by a failed task", Priority: 2, BlockedBy: []string{"failed"}},
		{ID: "after-both", Title: "blocked by done and open", Priority: 2, BlockedBy: []string{"done", "open"}},
		{ID: "blocked", Title: "explicitly blocked", Priority: 2, Status: loop.StatusBlocked},
	}
	f := s.open(t, seeds)
	f.wantReady(loop.Scope{}, []string{"open", "after-done"}, "with blockers")

	before := f.snapshot()
	for _, c := range []struct{ id, blocker string }{
		{"waits-later", "open"}, {"after-failed", "failed"}, {"after-both", "open"},
	} {
		_, err := f.store.Claim(t.Context(), loop.ClaimParams{TaskID: c.id, Agent: "agent-a"})
		wantErr(t, err, loop.ErrNotReady, "Claim("+c.id+")")
		if err != nil && !strings.Contains(err.Error(), c.blocker) {
			t.Errorf("Claim(%s): error %q does not name the unfinished blocker %s", c.id, err, c.blocker)
		}
	}
	f.unchanged(before, "refused claims")
}

// testCriticalPath: DESIGN §17's order of ready tasks — priority, then a
// task that lost a race to land, then the longest chain of work waiting on
// it (dependents, and a parent, which waits for its children), then age —
// for Ready and for claims.
func (s *suite) testCriticalPath(t *testing.T) {
	s.needDeps(t)
	p1 := s.seed("p1")
	p1.Priority = s.p(1)
	seeds := []Seed{
		s.seed("w1"), s.seed("w2"), s.seed("w3"), // older; nothing waits for w2, w3
		{ID: "w4", Title: "w4", Priority: 2, BlockedBy: []string{"w1"}},
		s.seed("c1"),
		{ID: "c2", Title: "c2", Priority: 2, BlockedBy: []string{"c1"}},
		{ID: "c3", Title: "c3", Priority: 2, BlockedBy: []string{"c2"}},
		s.seed("epic"),
		s.child("k", "epic"),
		p1,
	}
	f := s.open(t, seeds)
	// p1 by priority; then c1 (a chain of 3); then w1 (2: w4 waits for
	// it) and k (2: epic waits for it), by age; then w2, w3 by age.
	f.wantReady(loop.Scope{}, []string{"p1", "c1", "w1", "k", "w2", "w3"}, "at first")

	// A task released after it lost a race to land comes first of its
	// priority until it is claimed again.
	f.claim("w3", "agent-a")
	f.must(f.store.Release(t.Context(), loop.MoveParams{TaskID: "w3", Message: "integration conflict: a.txt", Raced: true}), "Release(w3, raced)")
	f.wantReady(loop.Scope{}, []string{"p1", "w3", "c1", "w1", "k", "w2"}, "after w3 lost a race")
	var got []string
	for range 2 {
		task, err := f.store.Claim(t.Context(), loop.ClaimParams{Agent: "agent-b"})
		f.must(err, "Claim")
		got = append(got, task.ID)
	}
	if diff := cmp.Diff([]string{"p1", "w3"}, got); diff != "" {
		t.Errorf("claim order (-want +got):\n%s", diff)
	}
	f.must(f.store.Release(t.Context(), loop.MoveParams{TaskID: "w3", Message: "stopped"}), "Release(w3)")
	f.wantReady(loop.Scope{}, []string{"c1", "w1", "k", "w2", "w3"}, "after w3 was claimed and released plainly")
}

func (s *suite) testCompleteUnblocks(t *testing.T) {
	s.needDeps(t)
	seeds := []Seed{
		s.seed("a"),
		{ID: "pending-dep", Title: "pending, blocked by a", Priority: 2, BlockedBy: []string{"a"}},
		{ID: "blocked-dep", Title: "blocked, blocked by a", Priority: 2, BlockedBy: []string{"a"}, Status: loop.StatusBlocked},
		{ID: "blocked-two", Title: "blocked by a and x", Priority: 2, BlockedBy: []string{"a", "x"}, Status: loop.StatusBlocked},
		{ID: "blocked-none", Title: "blocked without blockers", Priority: 2, Status: loop.StatusBlocked},
		s.seed("x"),
	}
	f := s.open(t, seeds)
	base := f.statuses()
	f.wantReady(loop.Scope{}, []string{"a", "x"}, "before completing a")

	f.claim("a", "agent-a")
	f.must(f.store.Complete(t.Context(), loop.MoveParams{TaskID: "a", Message: "a is finished"}), "Complete(a)")
	f.wantStatuses(base, map[string]loop.Status{
		"a": loop.StatusDone, "pending-dep": loop.StatusPending, "blocked-dep": loop.StatusPending,
	}, "after completing a")
	// x first: blocked-two waits for it, a chain of two (DESIGN §17).
	f.wantReady(loop.Scope{}, []string{"x", "pending-dep", "blocked-dep"}, "after completing a")
	f.wantLastLog("a", loop.LogEntry{At: suiteStart, Kind: loop.LogDone, Message: "a is finished", Actor: "user"})

	f.clock.Advance(time.Minute)
	f.claim("x", "agent-a")
	f.must(f.store.Complete(t.Context(), loop.MoveParams{TaskID: "x", Message: ""}), "Complete(x)")
	f.wantStatuses(base, map[string]loop.Status{
		"a": loop.StatusDone, "x": loop.StatusDone, "pending-dep": loop.StatusPending,
		"blocked-dep": loop.StatusPending, "blocked-two": loop.StatusPending,
	}, "after completing x")
}

func (s *suite) testParentNotReady(t *testing.T) {
	seeds := []Seed{
		{ID: "parent", Title: "parent", Priority: s.p(0)},
		s.child("c1", "parent"),
		s.child("c2", "parent"),
		s.seed("leaf"),
	}
	f := s.open(t, seeds)
	f.wantReady(loop.Scope{}, []string{"c1", "c2", "leaf"}, "with a parent")
	before := f.snapshot()
	_, err := f.store.Claim(t.Context(), loop.ClaimParams{TaskID: "parent", Agent: "agent-a"})
	wantErr(t, err, loop.ErrNotReady, "Claim(parent)")
	if err != nil && !strings.Contains(err.Error(), "child") {
		t.Errorf("Claim(parent): error %q does not say the task has children", err)
	}
	f.unchanged(before, "a refused claim of a parent")
}

func (s *suite) testFailedParent(t *testing.T) {
	seeds := []Seed{
		s.seed("parent"),
		s.child("c1", "parent"),
		s.child("c2", "parent"),
		s.seed("leaf"),
	}
	f := s.open(t, seeds)
	base := f.statuses()
	f.claim("c1", "agent-a")
	f.must(f.store.Fail(t.Context(), loop.MoveParams{TaskID: "c1", Message: "broken"}), "Fail(c1)")
	f.wantStatuses(base, map[string]loop.Status{"c1": loop.StatusFailed, "parent": loop.StatusFailed}, "after failing c1")
	f.wantReady(loop.Scope{}, []string{"leaf"}, "with a failed parent")

	before := f.snapshot()
	_, err := f.store.Claim(t.Context(), loop.ClaimParams{TaskID: "c2", Agent: "agent-a"})
	wantErr(t, err, loop.ErrNotReady, "Claim(c2) under a failed parent")
	if err != nil && !strings.Contains(err.Error(), "parent") {
		t.Errorf("Claim(c2): error %q does not name the failed parent", err)
	}
	f.unchanged(before, "a refused claim under a failed parent")

	// Retrying the child leaves the failed parent alone; retrying the
	// parent makes its children ready again.
	f.must(f.store.Retry(t.Context(), loop.MoveParams{TaskID: "c1", Message: "try again"}), "Retry(c1)")
	f.wantStatuses(base, map[string]loop.Status{"parent": loop.StatusFailed}, "after retrying c1")
	f.wantReady(loop.Scope{}, []string{"leaf"}, "after retrying c1 only")
	f.must(f.store.Retry(t.Context(), loop.MoveParams{TaskID: "parent", Message: "children retried"}), "Retry(parent)")
	f.wantStatuses(base, nil, "after retrying the parent")
	f.wantReady(loop.Scope{}, []string{"c1", "c2", "leaf"}, "after retrying the parent")
}

func (s *suite) testClaim(t *testing.T) {
	type tc struct {
		name   string
		seeds  []Seed
		before []string // ids claimed by agent-z first
		params loop.ClaimParams
		wantID string
		// check inspects the error of a claim that must fail.
		check func(t *testing.T, err error)
		deps  bool
	}
	notReady := func(word string) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			t.Helper()
			var te *loop.TransitionError
			if !errors.Is(err, loop.ErrNotReady) && !errors.As(err, &te) {
				t.Fatalf("error = %v, want ErrNotReady or a *loop.TransitionError", err)
			}
			if !strings.Contains(err.Error(), word) {
				t.Errorf("error %q does not name the reason %q", err, word)
			}
		}
	}
	two := []Seed{
		{ID: "second", Title: "second", Priority: s.p(2)},
		{ID: "first", Title: "first", Priority: s.p(1)},
	}
	if s.noPriorities {
		two[0], two[1] = two[1], two[0]
	}
	cases := []tc{
		{name: "next", seeds: two, params: loop.ClaimParams{Agent: "agent-a"}, wantID: "first"},
		{name: "by id", seeds: two, params: loop.ClaimParams{TaskID: "second", Agent: "agent-a"}, wantID: "second"},
		{name: "lease given", seeds: two, params: loop.ClaimParams{Agent: "agent-a", Lease: time.Hour}, wantID: "first"},
		{name: "by id ignores scope", seeds: two, wantID: "second",
			params: loop.ClaimParams{TaskID: "second", Agent: "agent-a", Scope: loop.Scope{TaskID: "first"}}},
		{name: "no ready task", seeds: two, before: []string{"first", "second"},
			params: loop.ClaimParams{Agent: "agent-a"},
			check:  func(t *testing.T, err error) { wantErr(t, err, loop.ErrNoReadyTask, "Claim") }},
		{name: "empty plan", params: loop.ClaimParams{Agent: "agent-a"},
			check: func(t *testing.T, err error) { wantErr(t, err, loop.ErrNoReadyTask, "Claim") }},
		{name: "in progress", seeds: two, before: []string{"first"},
			params: loop.ClaimParams{TaskID: "first", Agent: "agent-a"}, check: notReady(string(loop.StatusInProgress))},
		{name: "done", seeds: []Seed{{ID: "d", Title: "d", Priority: 2, Status: loop.StatusDone}},
			params: loop.ClaimParams{TaskID: "d", Agent: "agent-a"}, check: notReady(string(loop.StatusDone))},
		{name: "failed", seeds: []Seed{{ID: "f", Title: "f", Priority: 2, Status: loop.StatusFailed}},
			params: loop.ClaimParams{TaskID: "f", Agent: "agent-a"}, check: notReady(string(loop.StatusFailed))},
		{name: "blocked", seeds: []Seed{{ID: "b", Title: "b", Priority: 2, Status: loop.StatusBlocked}}, deps: true,
			params: loop.ClaimParams{TaskID: "b", Agent: "agent-a"}, check: notReady(string(loop.StatusBlocked))},
		{name: "no agent", seeds: two, params: loop.ClaimParams{Agent: ""},
			check: func(t *testing.T, err error) {
				if err == nil {
					t.Error("Claim without an agent succeeded")
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.deps {
				s.needDeps(t)
			}
			f := s.open(t, c.seeds)
			for _, id := range c.before {
				f.claim(id, "agent-z")
			}
			f.clock.Advance(time.Minute)
			before := f.snapshot()
			got, err := f.store.Claim(t.Context(), c.params)
			if c.check != nil {
				c.check(t, err)
				f.unchanged(before, "a refused claim")
				return
			}
			if err != nil {
				t.Fatalf("Claim(%+v): %v", c.params, err)
			}
			now := f.clock.Now()
			if got.ID != c.wantID || got.Status != loop.StatusInProgress || got.ClaimedBy != c.params.Agent || !got.ClaimedAt.Equal(now) {
				t.Errorf("Claim returned %s %s by %q at %v, want %s in_progress by %s at %v",
					got.ID, got.Status, got.ClaimedBy, got.ClaimedAt, c.wantID, c.params.Agent, now)
			}
			lease := c.params.Lease
			if lease == 0 {
				lease = loop.DefaultLease
			}
			if !s.noLeases && !got.LeaseExpiresAt.Equal(now.Add(lease)) {
				t.Errorf("LeaseExpiresAt = %v, want %v", got.LeaseExpiresAt, now.Add(lease))
			}
			if diff := cmp.Diff(got, f.get(got.ID), cmpOpts); diff != "" {
				t.Errorf("Claim's result differs from Get (-claim +get):\n%s", diff)
			}
		})
	}
}

func (s *suite) testParentDone(t *testing.T) {
	cases := []struct {
		name   string
		nested bool
		deps   bool
		seeds  []Seed
		// the leaves to complete in order, and the statuses changed after each
		steps []struct {
			id   string
			want map[string]loop.Status
		}
	}{
		{
			name: "one level",
			seeds: []Seed{
				s.seed("p"), s.child("c1", "p"), s.child("c2", "p"), s.seed("q"),
			},
			steps: []struct {
				id   string
				want map[string]loop.Status
			}{
				{"c1", map[string]loop.Status{"c1": loop.StatusDone}},
				{"c2", map[string]loop.Status{"c1": loop.StatusDone, "c2": loop.StatusDone, "p": loop.StatusDone}},
			},
		},
		{
			name: "two levels", nested: true,
			seeds: []Seed{
				s.seed("g"), s.child("p1", "g"), s.child("c1", "p1"), s.child("c2", "p1"),
				s.child("p2", "g"), s.child("c3", "p2"), s.seed("q"),
			},
			steps: []struct {
				id   string
				want map[string]loop.Status
			}{
				{"c1", map[string]loop.Status{"c1": loop.StatusDone}},
				{"c3", map[string]loop.Status{"c1": loop.StatusDone, "c3": loop.StatusDone, "p2": loop.StatusDone}},
				{"c2", map[string]loop.Status{"c1": loop.StatusDone, "c2": loop.StatusDone, "c3": loop.StatusDone,
					"p1": loop.StatusDone, "p2": loop.StatusDone, "g": loop.StatusDone}},
			},
		},
		{
			name: "auto-done parent unblocks its dependents", deps: true,
			seeds: []Seed{
				s.seed("p"), s.child("c1", "p"),
				{ID: "after-p", Title: "blocked by p", Priority: 2, BlockedBy: []string{"p"}, Status: loop.StatusBlocked},
			},
			steps: []struct {
				id   string
				want map[string]loop.Status
			}{
				{"c1", map[string]loop.Status{"c1": loop.StatusDone, "p": loop.StatusDone, "after-p": loop.StatusPending}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.nested {
				s.needNesting(t)
			}
			if c.deps {
				s.needDeps(t)
			}
			f := s.open(t, c.seeds)
			base := f.statuses()
			for _, step := range c.steps {
				f.clock.Advance(time.Second)
				f.claim(step.id, "agent-a")
				f.must(f.store.Complete(t.Context(), loop.MoveParams{TaskID: step.id, Message: "finished " + step.id}), "Complete("+step.id+")")
				f.wantStatuses(base, step.want, "after completing "+step.id)
			}
		})
	}
}

func (s *suite) testFailAncestors(t *testing.T) {
	cases := []struct {
		name      string
		nested    bool
		seeds     []Seed
		fail      string
		want      map[string]loop.Status
		wantReady []string
	}{
		{
			name:  "one level",
			seeds: []Seed{s.seed("p"), s.child("c", "p"), s.child("sib", "p"), s.seed("q")},
			fail:  "c",
			want:  map[string]loop.Status{"c": loop.StatusFailed, "p": loop.StatusFailed},
			// sib's parent failed, so only q is ready.
			wantReady: []string{"q"},
		},
		{
			name:   "two levels",
			nested: true,
			seeds: []Seed{
				s.seed("g"), s.child("p", "g"), s.child("c", "p"), s.child("sib", "p"),
				s.child("uncle", "g"), s.seed("q"),
			},
			fail:      "c",
			want:      map[string]loop.Status{"c": loop.StatusFailed, "p": loop.StatusFailed, "g": loop.StatusFailed},
			wantReady: []string{"q"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.nested {
				s.needNesting(t)
			}
			f := s.open(t, c.seeds)
			base := f.statuses()
			f.claim(c.fail, "agent-a")
			f.clock.Advance(time.Second)
			f.must(f.store.Fail(t.Context(), loop.MoveParams{TaskID: c.fail, Message: "tests do not pass"}), "Fail")
			f.wantStatuses(base, c.want, "after failing "+c.fail)
			f.wantLastLog(c.fail, loop.LogEntry{At: f.clock.Now(), Kind: loop.LogFail, Message: "tests do not pass", Actor: "user"})
			if got := f.get(c.fail); got.ClaimedBy != "" {
				t.Errorf("failed task still claimed by %q", got.ClaimedBy)
			}
			f.wantReady(loop.Scope{}, c.wantReady, "after the failure")
		})
	}
}

func (s *suite) testReleaseRetry(t *testing.T) {
	f := s.open(t, []Seed{s.seed("t1"), s.seed("t2")})
	ctx := t.Context()
	unclaimed := func(when string, retries int) {
		t.Helper()
		got := f.get("t1")
		want := viewOf(Seed{ID: "t1", Title: "task t1", Priority: 2}.Task())
		want.RetryCount = retries
		if diff := cmp.Diff(want, viewOf(got), cmpOpts); diff != "" {
			t.Errorf("t1 %s (-want +got):\n%s", when, diff)
		}
		if !got.ClaimedAt.IsZero() || !got.LeaseExpiresAt.IsZero() {
			t.Errorf("t1 %s: ClaimedAt %v, LeaseExpiresAt %v, want zero", when, got.ClaimedAt, got.LeaseExpiresAt)
		}
	}

	f.claim("t1", "agent-a")
	f.clock.Advance(time.Second)
	f.must(f.store.Release(ctx, loop.MoveParams{TaskID: "t1", Message: "agent crashed"}), "Release")
	unclaimed("after Release", 0)
	f.wantLastLog("t1", loop.LogEntry{At: f.clock.Now(), Kind: loop.LogRelease, Message: "agent crashed", Actor: "user"})

	f.claim("t1", "agent-a")
	f.clock.Advance(time.Second)
	f.must(f.store.Retry(ctx, loop.MoveParams{TaskID: "t1", Message: "verification failed"}), "Retry of in_progress")
	unclaimed("after Retry of in_progress", 1)
	f.wantLastLog("t1", loop.LogEntry{At: f.clock.Now(), Kind: loop.LogRetry, Message: "verification failed", Actor: "user"})

	f.claim("t1", "agent-a")
	f.must(f.store.Fail(ctx, loop.MoveParams{TaskID: "t1", Message: "gave up"}), "Fail")
	f.clock.Advance(time.Second)
	f.must(f.store.Retry(ctx, loop.MoveParams{TaskID: "t1", Message: "reset by hand"}), "Retry of failed")
	unclaimed("after Retry of failed", 2)
	f.wantLastLog("t1", loop.LogEntry{At: f.clock.Now(), Kind: loop.LogRetry, Message: "reset by hand", Actor: "user"})

	if got := f.claim("", "agent-b"); got.ID != "t1" || got.RetryCount != 2 {
		t.Errorf("claim after retries: got %s with RetryCount %d, want t1 with 2", got.ID, got.RetryCount)
	}
	if got := f.get("t2"); got.Status != loop.StatusPending || got.RetryCount != 0 {
		t.Errorf("t2 was touched: %s, RetryCount %d", got.Status, got.RetryCount)
	}
}

func (s *suite) testIllegalTransitions(t *testing.T) {
	type op struct {
		name string
		to   loop.Status
		call func(ctx context.Context, st loop.TaskStore, id string) error
	}
	complete := op{"Complete", loop.StatusDone, func(ctx context.Context, st loop.TaskStore, id string) error {
		return st.Complete(ctx, loop.MoveParams{TaskID: id, Message: "summary"})
	}}
	fail := op{"Fail", loop.StatusFailed, func(ctx context.Context, st loop.TaskStore, id string) error {
		return st.Fail(ctx, loop.MoveParams{TaskID: id, Message: "reason"})
	}}
	release := op{"Release", loop.StatusPending, func(ctx context.Context, st loop.TaskStore, id string) error {
		return st.Release(ctx, loop.MoveParams{TaskID: id, Message: "reason"})
	}}
	retry := op{"Retry", loop.StatusPending, func(ctx context.Context, st loop.TaskStore, id string) error {
		return st.Retry(ctx, loop.MoveParams{TaskID: id, Message: "reason"})
	}}
	cases := []struct {
		from loop.Status
		ops  []op
	}{
		{loop.StatusPending, []op{complete, fail, release, retry}},
		{loop.StatusDone, []op{complete, fail, release, retry}},
		{loop.StatusFailed, []op{complete, fail, release}},
		{loop.StatusBlocked, []op{complete, fail, release, retry}},
	}
	for _, c := range cases {
		for _, o := range c.ops {
			t.Run(fmt.Sprintf("%s from %s", o.name, c.from), func(t *testing.T) {
				if c.from == loop.StatusBlocked {
					s.needDeps(t)
				}
				// Neighbours that a wrong cascade would touch: a parent whose
				// only other child is done, and (with dependencies) a blocked
				// dependent.
				seeds := []Seed{
					s.seed("parent"),
					{ID: "sibling", Title: "sibling", Priority: 2, ParentID: "parent", Status: loop.StatusDone},
					{ID: "x", Title: "x", Priority: 2, ParentID: "parent", Status: c.from},
					s.seed("other"),
				}
				if !s.noDeps {
					seeds = append(seeds, Seed{ID: "dep", Title: "dep", Priority: 2, BlockedBy: []string{"x"}, Status: loop.StatusBlocked})
				}
				f := s.open(t, seeds)
				f.claim("other", "agent-a")
				f.clock.Advance(time.Minute)
				before := f.snapshot()
				err := o.call(t.Context(), f.store, "x")
				wantTransitionError(t, err, "x", c.from, o.to, o.name)
				f.unchanged(before, "an illegal "+o.name)
			})
		}
	}
}

func (s *suite) testRenewLease(t *testing.T) {
	s.needLeases(t)
	f := s.open(t, []Seed{s.seed("t1"), s.seed("t2")})
	ctx := t.Context()
	if _, err := f.store.Claim(ctx, loop.ClaimParams{TaskID: "t1", Agent: "agent-a", Lease: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(5 * time.Minute)
	f.must(f.store.RenewLease(ctx, "t1", "agent-a", 10*time.Minute), "RenewLease by the holder")
	if got, want := f.get("t1").LeaseExpiresAt, suiteStart.Add(15*time.Minute); !got.Equal(want) {
		t.Errorf("LeaseExpiresAt after renewal = %v, want %v", got, want)
	}

	before := f.snapshot()
	wantErr(t, f.store.RenewLease(ctx, "t1", "agent-b", time.Hour), loop.ErrNotHolder, "RenewLease by another agent")
	wantErr(t, f.store.RenewLease(ctx, "t2", "agent-a", time.Hour), loop.ErrNotHolder, "RenewLease of a pending task")
	f.unchanged(before, "refused renewals")

	// Past the first lease, inside the renewed one: the claim holds.
	f.clock.Advance(9 * time.Minute)
	_, err := f.store.Claim(ctx, loop.ClaimParams{TaskID: "t1", Agent: "agent-b"})
	wantErr(t, err, loop.ErrNotReady, "Claim of a renewed claim")
	if got := f.get("t1"); got.Status != loop.StatusInProgress || got.ClaimedBy != "agent-a" {
		t.Errorf("renewed task is %s held by %q, want in_progress held by agent-a", got.Status, got.ClaimedBy)
	}
	f.must(f.store.RenewLease(ctx, "t1", "agent-a", 0), "RenewLease with the default lease")
	if got, want := f.get("t1").LeaseExpiresAt, f.clock.Now().Add(loop.DefaultLease); !got.Equal(want) {
		t.Errorf("LeaseExpiresAt after default renewal = %v, want %v", got, want)
	}
}

func (s *suite) testLeaseExpiry(t *testing.T) {
	s.needLeases(t)
	f := s.open(t, []Seed{s.seed("t1"), s.seed("t2"), s.seed("t3")})
	ctx := t.Context()
	for _, c := range []struct {
		id, agent string
		lease     time.Duration
	}{{"t1", "agent-dead", time.Minute}, {"t2", "agent-slow", 2 * time.Minute}, {"t3", "agent-live", time.Hour}} {
		if _, err := f.store.Claim(ctx, loop.ClaimParams{TaskID: c.id, Agent: c.agent, Lease: c.lease}); err != nil {
			t.Fatal(err)
		}
	}

	f.clock.Advance(30 * time.Second)
	_, err := f.store.Claim(ctx, loop.ClaimParams{Agent: "agent-new"})
	wantErr(t, err, loop.ErrNoReadyTask, "Claim before any lease expired")

	f.clock.Advance(5 * time.Minute)
	got, err := f.store.Claim(ctx, loop.ClaimParams{Agent: "agent-new"})
	if err != nil {
		t.Fatalf("Claim after the leases expired: %v", err)
	}
	if got.ID != "t1" || got.ClaimedBy != "agent-new" {
		t.Errorf("Claim after expiry took %s for %q, want t1 for agent-new", got.ID, got.ClaimedBy)
	}
	t2 := f.get("t2")
	if t2.Status != loop.StatusPending || t2.ClaimedBy != "" {
		t.Errorf("t2 after its lease expired: %s held by %q, want pending and unclaimed", t2.Status, t2.ClaimedBy)
	}
	if t3 := f.get("t3"); t3.Status != loop.StatusInProgress || t3.ClaimedBy != "agent-live" {
		t.Errorf("t3 with a live lease: %s held by %q, want in_progress by agent-live", t3.Status, t3.ClaimedBy)
	}
	for _, c := range []struct{ id, holder string }{{"t1", "agent-dead"}, {"t2", "agent-slow"}} {
		var found bool
		for _, e := range f.logs(c.id) {
			if e.Kind == loop.LogLeaseExpired {
				found = true
				if !strings.Contains(e.Message, c.holder) {
					t.Errorf("%s: lease-expired entry %q does not name the holder %s", c.id, e.Message, c.holder)
				}
			}
		}
		if !found {
			t.Errorf("%s: no %s log entry after recovery; log: %+v", c.id, loop.LogLeaseExpired, f.logs(c.id))
		}
	}
	wantErr(t, f.store.RenewLease(ctx, "t2", "agent-slow", time.Hour), loop.ErrNotHolder, "RenewLease after expiry")
	if _, err := f.store.Claim(ctx, loop.ClaimParams{TaskID: "t2", Agent: "agent-new"}); err != nil {
		t.Errorf("Claim of a recovered task: %v", err)
	}
}

func (s *suite) testReleaseAgent(t *testing.T) {
	f := s.open(t, []Seed{s.seed("t1"), s.seed("t2"), s.seed("t3"), s.seed("t4")})
	ctx := t.Context()
	f.claim("t3", "agent-a")
	f.claim("t1", "agent-a")
	f.claim("t2", "agent-b")
	base := f.statuses()
	f.clock.Advance(time.Second)

	ids, err := f.store.ReleaseAgent(ctx, "agent-a", "session ended")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]string{"t1", "t3"}, ids); diff != "" {
		t.Errorf("ReleaseAgent ids (-want +got):\n%s", diff)
	}
	f.wantStatuses(base, map[string]loop.Status{"t1": loop.StatusPending, "t3": loop.StatusPending}, "after ReleaseAgent")
	for _, id := range []string{"t1", "t3"} {
		f.wantLastLog(id, loop.LogEntry{At: f.clock.Now(), Kind: loop.LogRelease, Message: "session ended", Actor: "agent-a"})
		if got := f.get(id); got.ClaimedBy != "" || got.RetryCount != 0 {
			t.Errorf("%s after ReleaseAgent: ClaimedBy %q, RetryCount %d", id, got.ClaimedBy, got.RetryCount)
		}
	}
	if got := f.get("t2").ClaimedBy; got != "agent-b" {
		t.Errorf("t2 ClaimedBy = %q, want agent-b", got)
	}

	before := f.snapshot()
	ids, err = f.store.ReleaseAgent(ctx, "agent-nobody", "x")
	if err != nil || len(ids) != 0 {
		t.Errorf("ReleaseAgent of an agent holding nothing = %v, %v; want none, nil", ids, err)
	}
	f.unchanged(before, "ReleaseAgent of an agent holding nothing")
}

func (s *suite) testActive(t *testing.T) {
	seeds := []Seed{s.seed("t1"), s.seed("t2"), s.seed("t3"), s.seed("t4")}
	f := s.open(t, seeds)
	f.claim("t3", "agent-a")
	f.clock.Advance(time.Second)
	f.claim("t1", "agent-b")
	f.clock.Advance(time.Second)
	f.claim("t2", "agent-a")
	f.must(f.store.Complete(t.Context(), loop.MoveParams{TaskID: "t2", Message: ""}), "Complete(t2)")
	active, err := f.store.Active(t.Context(), loop.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t3", "t1"}, taskIDs(active)); diff != "" {
		t.Errorf("Active, oldest claim first (-want +got):\n%s", diff)
	}
	if len(active) == 2 && (active[0].ClaimedBy != "agent-a" || active[1].ClaimedBy != "agent-b") {
		t.Errorf("Active holders = %q, %q; want agent-a, agent-b", active[0].ClaimedBy, active[1].ClaimedBy)
	}
}

func (s *suite) testCounts(t *testing.T) {
	seeds := []Seed{
		s.seed("p1"), s.seed("p2"), s.seed("p3"), s.seed("run"),
		{ID: "d1", Title: "d1", Priority: 2, Status: loop.StatusDone},
		{ID: "d2", Title: "d2", Priority: 2, Status: loop.StatusDone},
		{ID: "f1", Title: "f1", Priority: 2, Status: loop.StatusFailed},
	}
	want := loop.Counts{Pending: 3, InProgress: 1, Done: 2, Failed: 1}
	line := "open=3 active=1 done=2 failed=1 blocked=0 total=7"
	if !s.noDeps {
		seeds = append(seeds,
			Seed{ID: "b1", Title: "b1", Priority: 2, Status: loop.StatusBlocked},
			Seed{ID: "b2", Title: "b2", Priority: 2, Status: loop.StatusBlocked, BlockedBy: []string{"p1"}})
		want.Blocked = 2
		line = "open=5 active=1 done=2 failed=1 blocked=2 total=9"
	}
	f := s.open(t, seeds)
	f.claim("run", "agent-a")
	got, err := f.store.Counts(t.Context(), loop.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(line, got.String()); diff != "" {
		t.Errorf("Counts.String() (-want +got):\n%s", diff)
	}
	empty := s.open(t, nil)
	got, err = empty.store.Counts(t.Context(), loop.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(loop.Counts{}, got); diff != "" {
		t.Errorf("Counts of an empty store (-want +got):\n%s", diff)
	}
}

func (s *suite) testScopeFeature(t *testing.T) {
	s.needFeatures(t)
	seeds := []Seed{
		{ID: "a1", Title: "a1", Priority: s.p(3), Feature: "auth"},
		{ID: "b1", Title: "b1", Priority: s.p(1), Feature: "billing"},
		{ID: "n1", Title: "n1", Priority: s.p(0)},
		{ID: "a2", Title: "a2", Priority: s.p(2), Feature: "auth"},
		{ID: "a3", Title: "a3", Priority: 2, Feature: "auth", Status: loop.StatusDone},
	}
	f := s.open(t, seeds)
	auth := loop.Scope{Feature: "auth"}
	wantAuth := []string{"a2", "a1"}
	if s.noPriorities {
		wantAuth = []string{"a1", "a2"}
	}
	f.wantReady(auth, wantAuth, "by feature")
	f.wantReady(loop.Scope{Feature: "nothing"}, nil, "of a feature without tasks")

	got, err := f.store.Claim(t.Context(), loop.ClaimParams{Scope: auth, Agent: "agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != wantAuth[0] {
		t.Errorf("Claim in scope auth took %s, want %s", got.ID, wantAuth[0])
	}
	f.claim("b1", "agent-b")
	active, err := f.store.Active(t.Context(), auth)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{wantAuth[0]}, taskIDs(active)); diff != "" {
		t.Errorf("Active in scope auth (-want +got):\n%s", diff)
	}
	counts, err := f.store.Counts(t.Context(), auth)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(loop.Counts{Pending: 1, InProgress: 1, Done: 1}, counts); diff != "" {
		t.Errorf("Counts in scope auth (-want +got):\n%s", diff)
	}
}

func (s *suite) testScopeTask(t *testing.T) {
	seeds := []Seed{
		{ID: "q", Title: "q", Priority: s.p(0)},
		s.seed("p"),
		{ID: "c1", Title: "c1", Priority: s.p(3), ParentID: "p"},
		{ID: "c2", Title: "c2", Priority: s.p(1), ParentID: "p", Status: loop.StatusDone},
		{ID: "c3", Title: "c3", Priority: s.p(2), ParentID: "p"},
	}
	wantUnderP := []string{"c3", "c1"}
	if s.noPriorities {
		wantUnderP = []string{"c1", "c3"}
	}
	if !s.noNesting {
		seeds = append(seeds, Seed{ID: "c4", Title: "c4", Priority: s.p(4), ParentID: "p"},
			Seed{ID: "g1", Title: "grandchild", Priority: s.p(4), ParentID: "c4"})
		wantUnderP = append(wantUnderP, "g1")
	}
	f := s.open(t, seeds)
	p := loop.Scope{TaskID: "p"}
	f.wantReady(p, wantUnderP, "under a parent")
	f.wantReady(loop.Scope{TaskID: "q"}, []string{"q"}, "of a leaf")
	f.wantReady(loop.Scope{TaskID: "c1"}, []string{"c1"}, "of a child leaf")
	f.wantReady(loop.Scope{TaskID: "c2"}, nil, "of a done leaf")

	got, err := f.store.Claim(t.Context(), loop.ClaimParams{Scope: p, Agent: "agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != wantUnderP[0] {
		t.Errorf("Claim in scope of p took %s, want %s (q has a lower priority number but is outside)", got.ID, wantUnderP[0])
	}
	counts, err := f.store.Counts(t.Context(), loop.Scope{TaskID: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(loop.Counts{Pending: 1}, counts); diff != "" {
		t.Errorf("Counts in scope of leaf q (-want +got):\n%s", diff)
	}
	// loop.Scope: a task with children stands for its descendants.
	counts, err = f.store.Counts(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	want := loop.Counts{Pending: 1, InProgress: 1, Done: 1}
	if !s.noNesting {
		want.Pending += 2
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("Counts in scope of parent p, its descendants (-want +got):\n%s", diff)
	}
}

func (s *suite) testLogs(t *testing.T) {
	f := s.open(t, []Seed{s.seed("t1"), s.seed("t2")})
	ctx := t.Context()
	before := f.logs("t1")
	var want []loop.LogEntry
	want = append(want, before...)
	for i, e := range []struct{ kind, msg string }{
		{loop.LogNote, "first"}, {"custom-kind", "second\nwith a newline"}, {loop.LogNote, ""}, {loop.LogNote, "fourth"},
	} {
		f.clock.Advance(time.Duration(i+1) * time.Second)
		f.must(f.store.AddLog(ctx, "t1", e.kind, e.msg), "AddLog")
		want = append(want, loop.LogEntry{At: f.clock.Now(), Kind: e.kind, Message: e.msg, Actor: loop.ActorRalph})
	}
	if diff := cmp.Diff(want, f.logs("t1"), cmpOpts); diff != "" {
		t.Errorf("Logs(t1), oldest first (-want +got):\n%s", diff)
	}
	if got := f.logs("t2"); len(got) != 0 {
		t.Errorf("Logs(t2) = %+v, want none: entries leaked across tasks", got)
	}
}

func (s *suite) testVerification(t *testing.T) {
	f := s.open(t, []Seed{s.seed("t1")})
	f.claim("t1", "agent-a")
	for _, verdict := range []string{"pass", "fail"} {
		f.must(f.store.SetVerification(t.Context(), "t1", verdict), "SetVerification("+verdict+")")
		if got := f.get("t1").VerificationStatus; got != verdict {
			t.Errorf("VerificationStatus = %q, want %q", got, verdict)
		}
	}
}

func (s *suite) testConcurrentClaims(t *testing.T) {
	const workers, perWorker = 8, 12
	seeds := make([]Seed, workers*perWorker)
	for i := range seeds {
		seeds[i] = s.seed(fmt.Sprintf("c%03d", i))
		seeds[i].Priority = s.p(i % 3)
	}
	f := s.open(t, seeds)
	ctx := t.Context()
	claimed := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			agent := fmt.Sprintf("agent-%d", w)
			for {
				task, err := f.store.Claim(ctx, loop.ClaimParams{Agent: agent})
				if errors.Is(err, loop.ErrNoReadyTask) {
					return
				}
				if err != nil {
					t.Errorf("%s: Claim: %v", agent, err)
					return
				}
				if task.ClaimedBy != agent {
					t.Errorf("%s: claimed %s but it shows holder %q", agent, task.ID, task.ClaimedBy)
				}
				claimed[w] = append(claimed[w], task.ID)
				if err := f.store.Complete(ctx, loop.MoveParams{TaskID: task.ID, Message: "by " + agent}); err != nil {
					t.Errorf("%s: Complete(%s): %v", agent, task.ID, err)
					return
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, ids := range claimed {
		for _, id := range ids {
			seen[id]++
		}
	}
	for _, id := range f.ids {
		if seen[id] != 1 {
			t.Errorf("task %s claimed %d times, want exactly once", id, seen[id])
		}
	}
	counts, err := f.store.Counts(ctx, loop.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(loop.Counts{Done: len(seeds)}, counts); diff != "" {
		t.Errorf("Counts after concurrent claims (-want +got):\n%s", diff)
	}
}

func (s *suite) testConcurrentClaimByID(t *testing.T) {
	const workers = 8
	f := s.open(t, []Seed{s.seed("only")})
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			_, errs[w] = f.store.Claim(t.Context(), loop.ClaimParams{TaskID: "only", Agent: fmt.Sprintf("agent-%d", w)})
		})
	}
	wg.Wait()
	var winners []string
	for w, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, fmt.Sprintf("agent-%d", w))
		case !errors.Is(err, loop.ErrNotReady):
			var te *loop.TransitionError
			if !errors.As(err, &te) {
				t.Errorf("agent-%d: error = %v, want ErrNotReady", w, err)
			}
		}
	}
	if len(winners) != 1 {
		t.Fatalf("claim winners = %v, want exactly one", winners)
	}
	if got := f.get("only").ClaimedBy; got != winners[0] {
		t.Errorf("holder = %q, want the winner %s", got, winners[0])
	}
}

func (s *suite) testCancelled(t *testing.T) {
	f := s.open(t, []Seed{s.seed("held"), s.seed("free"), s.seed("other")})
	f.claim("held", "agent-a")
	f.clock.Advance(time.Second)
	before := f.snapshot()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := f.store.Get(ctx, "held"); return err }},
		{"Ready", func() error { _, err := f.store.Ready(ctx, loop.Scope{}, 0); return err }},
		{"Active", func() error { _, err := f.store.Active(ctx, loop.Scope{}); return err }},
		{"Counts", func() error { _, err := f.store.Counts(ctx, loop.Scope{}); return err }},
		{"Claim next", func() error { _, err := f.store.Claim(ctx, loop.ClaimParams{Agent: "agent-b"}); return err }},
		{"Claim by id", func() error {
			_, err := f.store.Claim(ctx, loop.ClaimParams{TaskID: "free", Agent: "agent-b"})
			return err
		}},
		{"RenewLease", func() error { return f.store.RenewLease(ctx, "held", "agent-a", time.Hour) }},
		{"Complete", func() error { return f.store.Complete(ctx, loop.MoveParams{TaskID: "held", Message: "done"}) }},
		{"Fail", func() error { return f.store.Fail(ctx, loop.MoveParams{TaskID: "held", Message: "boom"}) }},
		{"Release", func() error { return f.store.Release(ctx, loop.MoveParams{TaskID: "held", Message: "later"}) }},
		{"ReleaseAgent", func() error { _, err := f.store.ReleaseAgent(ctx, "agent-a", "bye"); return err }},
		{"Retry", func() error { return f.store.Retry(ctx, loop.MoveParams{TaskID: "held", Message: "again"}) }},
		{"SetVerification", func() error { return f.store.SetVerification(ctx, "held", "pass") }},
		{"AddLog", func() error { return f.store.AddLog(ctx, "held", loop.LogNote, "hi") }},
		{"Logs", func() error { _, err := f.store.Logs(ctx, "held"); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, c.call(), context.Canceled, c.name+" with a cancelled context")
		})
	}
	f.unchanged(before, "calls with a cancelled context")
}

func (s *suite) testClaimRecordsHolder(t *testing.T) {
	f := s.open(t, []Seed{s.seed("t1"), s.seed("t2")})
	me := loop.ThisProcess()
	got, err := f.store.Claim(t.Context(), loop.ClaimParams{TaskID: "t1", Agent: "agent-a", Holder: me, Mode: loop.ClaimLoop})
	if err != nil {
		t.Fatal(err)
	}
	type claim struct {
		ClaimedBy  string
		Holder     loop.Holder
		Mode       loop.ClaimMode
		Generation int64
	}
	want := claim{"agent-a", me, loop.ClaimLoop, 1}
	for _, task := range []loop.Task{got, f.get("t1")} {
		if diff := cmp.Diff(want, claim{task.ClaimedBy, task.Holder, task.ClaimMode, task.Generation}); diff != "" {
			t.Errorf("claim of t1 (-want +got):\n%s", diff)
		}
	}
	// Each claim gets the next generation; the number survives the claim.
	f.must(f.store.Release(t.Context(), loop.MoveParams{TaskID: "t1", Message: "later", By: loop.Actor{Agent: "agent-a", Loop: true}}), "Release")
	if task := f.get("t1"); task.Generation != 1 || !task.Holder.IsZero() || task.ClaimMode != "" {
		t.Errorf("t1 released: generation %d, holder %v, mode %q; want 1 and no claim", task.Generation, task.Holder, task.ClaimMode)
	}
	again := f.claim("t1", "agent-b")
	if again.Generation != 2 || !again.Holder.IsZero() || again.ClaimMode != "" {
		t.Errorf("second claim of t1 (by hand): generation %d, holder %v, mode %q; want 2, none, none", again.Generation, again.Holder, again.ClaimMode)
	}
	if got := f.get("t2").Generation; got != 0 {
		t.Errorf("t2, never claimed: generation %d", got)
	}
}

func (s *suite) testWhoMayMove(t *testing.T) {
	ctx := t.Context()
	me := loop.ThisProcess() // a live holder
	agentA, agentB := loop.Actor{Agent: "agent-a"}, loop.Actor{Agent: "agent-b"}
	loopA := loop.Actor{Agent: "agent-a", Loop: true}
	person := loop.Actor{Person: "user-alice"}
	forced := loop.Actor{Person: "user-alice", Force: true}
	type move func(loop.MoveParams) error
	moves := map[loop.MoveKind]func(*fixture) move{
		loop.MoveComplete: func(f *fixture) move { return func(p loop.MoveParams) error { return f.store.Complete(ctx, p) } },
		loop.MoveFail:     func(f *fixture) move { return func(p loop.MoveParams) error { return f.store.Fail(ctx, p) } },
		loop.MoveRelease:  func(f *fixture) move { return func(p loop.MoveParams) error { return f.store.Release(ctx, p) } },
		loop.MoveRetry:    func(f *fixture) move { return func(p loop.MoveParams) error { return f.store.Retry(ctx, p) } },
	}
	tests := []struct {
		name   string
		claim  loop.ClaimParams // of t1
		by     loop.Actor
		kinds  []loop.MoveKind
		refuse error // nil: allowed
	}{
		{"an agent moves another's task", loop.ClaimParams{Agent: "agent-a", Holder: me, Mode: loop.ClaimAgent}, agentB,
			[]loop.MoveKind{loop.MoveComplete, loop.MoveFail, loop.MoveRelease, loop.MoveRetry}, loop.ErrNotHolder},
		{"an agent moves its own claim", loop.ClaimParams{Agent: "agent-a", Holder: me, Mode: loop.ClaimAgent}, agentA,
			[]loop.MoveKind{loop.MoveComplete, loop.MoveFail, loop.MoveRelease, loop.MoveRetry}, nil},
		{"an agent completes or fails the loop's claim for it", loop.ClaimParams{Agent: "agent-a", Holder: me, Mode: loop.ClaimLoop}, agentA,
			[]loop.MoveKind{loop.MoveComplete, loop.MoveFail}, loop.ErrLoopClaim},
		{"an agent releases or retries the loop's claim for it", loop.ClaimParams{Agent: "agent-a", Holder: me, Mode: loop.ClaimLoop}, agentA,
			[]loop.MoveKind{loop.MoveRelease, loop.MoveRetry}, loop.ErrLoopClaim},
		{"the loop moves its claim", loop.ClaimParams{Agent: "agent-a", Holder: me, Mode: loop.ClaimLoop}, loopA,
			[]loop.MoveKind{loop.MoveComplete, loop.MoveFail, loop.MoveRelease, loop.MoveRetry}, nil},
		{"a person moves a live agent's task", loop.ClaimParams{Agent: "agent-a", Holder: me, Mode: loop.ClaimLoop}, person,
			[]loop.MoveKind{loop.MoveComplete, loop.MoveFail, loop.MoveRelease, loop.MoveRetry}, loop.ErrHeldByLiveAgent},
		{"a person forces it", loop.ClaimParams{Agent: "agent-a", Holder: me, Mode: loop.ClaimLoop}, forced,
			[]loop.MoveKind{loop.MoveComplete, loop.MoveFail, loop.MoveRelease, loop.MoveRetry}, nil},
		{"a person moves a claim made by hand", loop.ClaimParams{Agent: "user-bob"}, person,
			[]loop.MoveKind{loop.MoveComplete, loop.MoveFail, loop.MoveRelease, loop.MoveRetry}, nil},
	}
	for _, tt := range tests {
		for _, kind := range tt.kinds {
			t.Run(tt.name+"/"+string(kind), func(t *testing.T) {
				f := s.open(t, []Seed{s.seed("t1")})
				p := tt.claim
				p.TaskID = "t1"
				task, err := f.store.Claim(ctx, p)
				f.must(err, "Claim")
				before := f.snapshot()
				by := tt.by
				if by.Loop {
					by.Generation = task.Generation
				}
				err = moves[kind](f)(loop.MoveParams{TaskID: "t1", Message: "moved", By: by})
				if tt.refuse != nil {
					wantErr(t, err, tt.refuse, string(kind)+" by "+by.Name())
					if err != nil && !strings.Contains(err.Error(), "t1") {
						t.Errorf("refusal %q does not name the task", err)
					}
					if err != nil && tt.refuse != loop.ErrLoopClaim && !strings.Contains(err.Error(), "agent-a") {
						t.Errorf("refusal %q does not name the holder agent-a", err)
					}
					if tt.refuse == loop.ErrHeldByLiveAgent {
						var held *loop.HeldError
						want := loop.HeldError{TaskID: "t1", ClaimedBy: "agent-a", Holder: me, Move: kind}
						if !errors.As(err, &held) || *held != want {
							t.Errorf("refusal %q: want a *loop.HeldError %+v", err, want)
						}
					}
					f.unchanged(before, "a refused "+string(kind))
					return
				}
				f.must(err, string(kind)+" by "+by.Name())
				if got := f.lastLog("t1"); got.Actor != by.Name() {
					t.Errorf("history names %q, want %q", got.Actor, by.Name())
				}
			})
		}
	}
}

func (s *suite) testStaleClaim(t *testing.T) {
	ctx := t.Context()
	f := s.open(t, []Seed{s.seed("t1")})
	first, err := f.store.Claim(ctx, loop.ClaimParams{TaskID: "t1", Agent: "agent-a", Mode: loop.ClaimLoop})
	f.must(err, "Claim")
	f.must(f.store.Release(ctx, loop.MoveParams{TaskID: "t1", Message: "taken back", By: loop.Actor{Person: "user-alice"}}), "Release")
	f.clock.Advance(time.Second)
	second := f.claim("t1", "agent-a") // the same agent, a new claim
	if second.Generation != first.Generation+1 {
		t.Fatalf("generations %d then %d", first.Generation, second.Generation)
	}
	before := f.get("t1")
	stale := loop.Actor{Agent: "agent-a", Loop: true, Generation: first.Generation}
	err = f.store.Complete(ctx, loop.MoveParams{TaskID: "t1", Message: "late", By: stale})
	wantErr(t, err, loop.ErrStaleClaim, "Complete from claim 1 after claim 2")
	if diff := cmp.Diff(viewOf(before), viewOf(f.get("t1"))); diff != "" {
		t.Errorf("a stale outcome changed the task (-before +after):\n%s", diff)
	}
	got := f.lastLog("t1")
	if got.Kind != loop.LogOutcomeRefused || got.Actor != "agent-a" || !strings.Contains(got.Message, "1") {
		t.Errorf("last history entry %+v, want the refusal, by agent-a, naming claim 1", got)
	}
	// The current claim's outcome is taken.
	f.must(f.store.Complete(ctx, loop.MoveParams{TaskID: "t1", Message: "done", By: loop.Actor{Agent: "agent-a", Loop: true, Generation: second.Generation}}), "Complete from claim 2")
}

func (s *suite) testHolderGone(t *testing.T) {
	f := s.open(t, []Seed{s.seed("t1"), s.seed("t2"), s.seed("t3")})
	ctx := t.Context()
	dead := DeadHolder(t)
	f.must(claimErr(f.store.Claim(ctx, loop.ClaimParams{TaskID: "t1", Agent: "agent-dead", Holder: dead, Mode: loop.ClaimLoop})), "Claim t1")
	f.must(claimErr(f.store.Claim(ctx, loop.ClaimParams{TaskID: "t2", Agent: "agent-live", Holder: loop.ThisProcess(), Mode: loop.ClaimLoop})), "Claim t2")
	elsewhere := dead
	elsewhere.Host = "another-machine"
	f.must(claimErr(f.store.Claim(ctx, loop.ClaimParams{TaskID: "t3", Agent: "agent-far", Holder: elsewhere, Mode: loop.ClaimLoop})), "Claim t3")

	// The next call of any method, well within the lease, recovers t1: its
	// holder process is gone. The live holder's claim and the one on
	// another host (known by its lease alone) stay.
	got := f.get("t1")
	if got.Status != loop.StatusPending || got.ClaimedBy != "" {
		t.Errorf("t1, held by a process that is gone: %s held by %q, want pending", got.Status, got.ClaimedBy)
	}
	e := f.lastLog("t1")
	if e.Kind != loop.LogHolderGone || e.Actor != loop.ActorRalph || !strings.Contains(e.Message, "agent-dead") || !strings.Contains(e.Message, dead.String()) {
		t.Errorf("t1's last entry %+v, want holder-gone by ralph naming agent-dead and its holder", e)
	}
	for _, id := range []string{"t2", "t3"} {
		if st := f.get(id).Status; st != loop.StatusInProgress {
			t.Errorf("%s: %s, want still in_progress", id, st)
		}
	}
}

func (s *suite) testHistory(t *testing.T) {
	f := s.open(t, []Seed{s.seed("t1")})
	ctx := t.Context()
	f.must(claimErr(f.store.Claim(ctx, loop.ClaimParams{TaskID: "t1", Agent: "agent-a", Mode: loop.ClaimLoop})), "Claim")
	f.clock.Advance(time.Second)
	f.must(f.store.Complete(ctx, loop.MoveParams{TaskID: "t1", Message: "built it", By: loop.Actor{Agent: "agent-a", Loop: true}}), "Complete")
	type entry struct{ Kind, Actor string }
	var got []entry
	for _, e := range f.logs("t1") {
		got = append(got, entry{e.Kind, e.Actor})
	}
	want := []entry{{loop.LogClaim, "agent-a"}, {loop.LogDone, "agent-a"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("t1's history (-want +got):\n%s", diff)
	}
	if got := loop.Summary(f.logs("t1")); got != "built it" {
		t.Errorf("summary %q, want the completion's", got)
	}
}

// claimErr drops the task of a Claim.
func claimErr(_ loop.Task, err error) error { return err }

// testChecks: a task's check and the agent that wrote it are kept as they
// were given, through Get, Ready, a claim, a retry and completion; a
// store that adds or lists tasks keeps them too, and drops a CheckBy that
// marks no check.
func (s *suite) testChecks(t *testing.T) {
	if s.noChecks {
		t.Skip("looptest: skipped: the store declared WithoutChecks (no per-task checks)")
	}
	const quoted = "test -f 'a b' && go test ./parser/... \\\n\t-run \"TestParse\" # a comment"
	seeds := []Seed{
		{ID: "by-agent", Title: "Parse", Priority: 2, Check: quoted, CheckBy: "agent-1a2b3c4d"},
		{ID: "by-person", Title: "Lint", Priority: 2, Check: "make lint"},
		{ID: "none", Title: "Docs", Priority: 2},
	}
	f := s.open(t, seeds)
	ctx := t.Context()
	want := func(got loop.Task, sd Seed, when string) {
		t.Helper()
		if got.Check != sd.Check || got.CheckBy != sd.CheckBy {
			t.Errorf("%s: task %s has check %q by %q, want %q by %q", when, sd.ID, got.Check, got.CheckBy, sd.Check, sd.CheckBy)
		}
	}
	for _, sd := range seeds {
		want(f.get(sd.ID), sd, "Get")
	}
	ready, err := f.store.Ready(ctx, loop.Scope{}, 0)
	f.must(err, "Ready")
	for i, task := range ready {
		want(task, seeds[i], "Ready")
	}
	claimed := f.claim("by-agent", "agent-a")
	want(claimed, seeds[0], "Claim")
	f.must(f.store.Retry(ctx, loop.MoveParams{TaskID: "by-agent", Message: "check failed", By: loop.Actor{Agent: "agent-a"}}), "Retry")
	want(f.get("by-agent"), seeds[0], "after Retry")
	f.claim("by-agent", "agent-a")
	f.must(f.store.Complete(ctx, loop.MoveParams{TaskID: "by-agent", Message: "ok", By: loop.Actor{Agent: "agent-a"}}), "Complete")
	want(f.get("by-agent"), seeds[0], "after Complete")

	if a, ok := f.store.(loop.TaskAdder); ok {
		added, err := a.AddTask(ctx, loop.NewTask{Title: "Added", Priority: 2, Check: "go vet ./...", CheckBy: "agent-b"})
		f.must(err, "AddTask")
		want(added, Seed{ID: added.ID, Check: "go vet ./...", CheckBy: "agent-b"}, "AddTask")
		want(f.get(added.ID), Seed{ID: added.ID, Check: "go vet ./...", CheckBy: "agent-b"}, "Get after AddTask")
		bare, err := a.AddTask(ctx, loop.NewTask{Title: "Bare", Priority: 2, CheckBy: "agent-b"})
		f.must(err, "AddTask")
		want(f.get(bare.ID), Seed{ID: bare.ID}, "AddTask with a CheckBy and no Check")
	}
	if l, ok := f.store.(loop.TaskLister); ok {
		byID := map[string]Seed{}
		for _, sd := range seeds {
			byID[sd.ID] = sd
		}
		f.must(l.ListTasks(ctx, loop.ListQuery{}, func(task loop.Task) error {
			if sd, ok := byID[task.ID]; ok {
				want(task, sd, "ListTasks")
			}
			return nil
		}), "ListTasks")
	}
}
