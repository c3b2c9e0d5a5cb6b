// Package looptest is ralph's test kit, for ralph's own tests and for
// programs that embed package loop (as net/http/httptest is for net/http):
//
//   - MemStore, an in-memory loop.TaskStore (also loop.FeatureStore,
//     loop.ReceiptStore, loop.LandingStore and loop.RunRecorder) with the full ARCHITECTURE.md §2
//     semantics and an injected clock;
//   - FakeRunner, a scripted loop.Runner, with Result, ErrorResult,
//     UsageLimited and Cancelled to build its answers;
//   - TestTaskStore, the one conformance suite every loop.TaskStore passes:
//     MemStore, the SQLite store in package dag, the progress-file store;
//     TestLandingStore, the suite of loop.LandingStore, and TestRunRecorder,
//     the suite of loop.RunRecorder (each over MemStore, the SQLite and the
//     PostgreSQL store);
//   - Clock, a fake clock that moves only when told.
//
// It imports only package loop, the standard library (testing included)
// and go-cmp, which the conformance suite reports differences with.
//
// # Testing your own TaskStore
//
// Write a StoreFactory that builds a fresh store holding exactly the seeds,
// in order, with the given clock, and hand it to TestTaskStore from a test:
//
//	func TestConformance(t *testing.T) {
//		looptest.TestTaskStore(t, func(t *testing.T, seeds []looptest.Seed, now func() time.Time) loop.TaskStore {
//			s := mystore.Open(t.TempDir(), mystore.WithClock(now))
//			t.Cleanup(func() { s.Close() })
//			for _, sd := range seeds {
//				// create sd.Feature if needed, then insert sd.Task()
//			}
//			return s
//		})
//	}
//
// Seeds may name blockers that come later in the list. Each subtest builds
// its own store and clock (starting at a whole second; times in the suite
// are whole seconds, so stores that keep second precision pass). A store
// that cannot do something says so with an option — WithoutDependencies,
// WithoutLeases, WithoutPriorities, WithoutFeatures, WithoutNesting,
// WithoutChecks — and
// exactly the subtests or cases that need it are skipped with a message
// naming the option. TestTaskStore's doc lists what the suite expects where
// loop.TaskStore's doc leaves room.
//
// # Decisions
//
// MemStore:
//
//   - Scope.TaskID naming a task with children covers its descendants (not
//     the task itself); naming a leaf, the leaf. Scope.Feature and TaskID
//     together intersect. A scope naming an unknown task is ErrNotFound.
//     A claim by id ignores Scope (loop.ClaimParams says Scope limits
//     id-less claims).
//   - Readiness looks at the direct parent only ("its parent is not
//     failed"); failure propagates to every ancestor, so after a failure
//     the whole line is failed anyway.
//   - Auto-transitions: a parent becomes done when all its children are
//     done, from whatever status it had other than done (logged
//     LogDone "all child tasks done"); a blocked dependent whose blockers
//     are all done becomes pending (logged LogUnblock); a failure fails
//     every ancestor not already failed, done ones included (logged
//     LogFail "child task X failed"). Auto-transitions do not check
//     loop.CanTransition: they are not triggers of the table.
//   - Claims are logged as LogClaim "claimed by AGENT". Leaving
//     in_progress clears ClaimedBy, ClaimedAt and LeaseExpiresAt. A lease
//     has expired when the clock reaches LeaseExpiresAt; every method,
//     reads included, first recovers expired claims (LogLeaseExpired, the
//     message names the holder and the expiry time); a lease recovery is
//     not a retry (RetryCount unchanged).
//   - A claim of a named task that is not pending wraps both
//     loop.ErrNotReady and a *loop.TransitionError; other not-ready claims
//     wrap ErrNotReady. Messages say why: the status, "N child tasks", the
//     failed parent, or the first unfinished blocker with its status.
//   - Empty reasons are logged as "released", "retry", "failed"; an empty
//     Complete summary logs nothing (as loop.TaskStore documents).
//     SetVerification accepts "pass", "fail" and "" (clears); Claim and
//     ReleaseAgent need an agent; AddLog needs a kind; negative leases
//     are errors. Every error leaves the store unchanged.
//   - Add seeds tasks as given (statuses included, no auto-transition),
//     all or nothing, with forward references inside one call and cycle
//     checks over parents and blockers; in_progress needs ClaimedBy.
//     AddDependency, Block and Unblock mirror `ralph task dep add`,
//     `task block` and `task unblock`.
//   - Receipts come newest (last recorded) first.
//   - Run records (loop.RunRecorder) are a slice; a run's id is its place
//     in it, from 1.
//   - Landings (loop.LandingStore) live in memory beside the tasks;
//     AcceptTip's reopen runs the same index updates as any status change
//     (dependents count the task as an unmet blocker again).
//   - Readiness is kept on write, as dag does for SQLite: each
//     task counts its unmet blockers, the ready tasks stay sorted in claim
//     order, and the claimed set and per-status counts are updated on every
//     status change. Ready, Claim and unscoped Counts do not scan the plan,
//     so a loop benchmarked on a MemStore of 10,000 tasks measures the loop,
//     not the fake. Scoped Counts scan.
//
// FakeRunner: each Run consumes one step, except a Run whose context is
// already done (recorded, nothing consumed, Cancelled()). A session whose
// context is done by the time it ends returns Cancelled(), whatever its
// script said, so cancellation tests do not race. Events are delivered
// exactly as scripted (no EventResult is invented). A run past the script
// fails the test given to NewFakeRunner (t.Errorf, so it is safe from the
// loop's goroutines) and returns an error wrapping ErrScriptExhausted.
package looptest
