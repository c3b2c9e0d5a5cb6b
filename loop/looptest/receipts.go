package looptest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

// TestReceiptStore runs the conformance subtests of loop.ReceiptStore and
// loop.ResultStore against stores from newStore, which must implement
// both. Beyond their docs the suite expects StartedAt and Duration kept
// to the microsecond.
func TestReceiptStore(t *testing.T, newStore StoreFactory) {
	t.Helper()
	tests := []struct {
		name string
		run  func(*testing.T, StoreFactory)
	}{
		{"NewestFirst", testReceiptsNewestFirst},
		{"Results", testReceiptResults},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newStore) })
	}
}

func receiptStore(t *testing.T, newStore StoreFactory) interface {
	loop.ReceiptStore
	loop.ResultStore
} {
	t.Helper()
	s := newStore(t, nil, NewClock(suiteStart).Now)
	rs, ok := s.(interface {
		loop.ReceiptStore
		loop.ResultStore
	})
	if !ok {
		t.Fatalf("%T does not implement loop.ReceiptStore and loop.ResultStore", s)
	}
	return rs
}

// receipt is a receipt of every field set, iteration n of session.
func receipt(session, worker string, n int, mode loop.Mode) loop.Receipt {
	return loop.Receipt{
		Session: session, Iteration: n, Mode: string(mode), TaskID: "t1", Model: "sonnet",
		InputTokens: 10, OutputTokens: 20, CacheReadTokens: 30, CacheWriteTokens: 40,
		CostUSD: 0.25, StartedAt: suiteStart.Add(time.Duration(n) * time.Minute), Duration: 90 * time.Second,
		Turns: 3, ExitReason: "success", Worker: worker, Agent: "codex", CostSource: loop.CostEstimated,
	}
}

func mustRecordReceipts(t *testing.T, s loop.ReceiptStore, rs ...loop.Receipt) {
	t.Helper()
	for _, r := range rs {
		if err := s.RecordReceipt(t.Context(), r); err != nil {
			t.Fatalf("RecordReceipt(%s %d): %v", r.Session, r.Iteration, err)
		}
	}
}

func mustReceipts(t *testing.T, s loop.ReceiptStore, limit int) []loop.Receipt {
	t.Helper()
	got, err := s.Receipts(t.Context(), limit)
	if err != nil {
		t.Fatalf("Receipts(%d): %v", limit, err)
	}
	return got
}

// testReceiptsNewestFirst: every field comes back; newest first; limit.
func testReceiptsNewestFirst(t *testing.T, newStore StoreFactory) {
	s := receiptStore(t, newStore)
	if got := mustReceipts(t, s, 0); len(got) != 0 {
		t.Fatalf("Receipts of a new store = %v, want none", got)
	}
	a, b, c := receipt("s1", "", 1, loop.ModeBuild), receipt("s1", "", 2, loop.ModeBuild), receipt("s1", "", 2, loop.ModeVerify)
	c.Verdict = "pass"
	mustRecordReceipts(t, s, a, b, c)
	if diff := cmp.Diff([]loop.Receipt{c, b, a}, mustReceipts(t, s, 0), cmp.Comparer(sameInstant)); diff != "" {
		t.Errorf("Receipts(0) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]loop.Receipt{c, b}, mustReceipts(t, s, 2), cmp.Comparer(sameInstant)); diff != "" {
		t.Errorf("Receipts(2) (-want +got):\n%s", diff)
	}
}

// testReceiptResults: RecordResult marks the receipts of one iteration of
// one session and worker, the verifier's excepted; no receipt is no
// error.
func testReceiptResults(t *testing.T, newStore StoreFactory) {
	s := receiptStore(t, newStore)
	work := receipt("s1", "w1", 1, loop.ModeBuild)
	verify := receipt("s1", "w1", 1, loop.ModeVerify)
	otherWorker := receipt("s1", "w2", 1, loop.ModeBuild)
	otherSession := receipt("s2", "w1", 1, loop.ModeBuild)
	next := receipt("s1", "w1", 2, loop.ModeBuild)
	mustRecordReceipts(t, s, work, verify, otherWorker, otherSession, next)

	if err := s.RecordResult(t.Context(), "s1", "w1", 1, loop.IterTestsFailed); err != nil {
		t.Fatalf("RecordResult: %v", err)
	}
	if err := s.RecordResult(t.Context(), "s9", "", 7, loop.IterDone); err != nil {
		t.Fatalf("RecordResult of no receipt = %v, want nil", err)
	}
	work.Result = loop.IterTestsFailed
	want := []loop.Receipt{next, otherSession, otherWorker, verify, work}
	if diff := cmp.Diff(want, mustReceipts(t, s, 0), cmp.Comparer(sameInstant)); diff != "" {
		t.Errorf("Receipts after RecordResult (-want +got):\n%s", diff)
	}

	// A later result replaces an earlier one (a retried record).
	if err := s.RecordResult(t.Context(), "s1", "w1", 1, loop.IterDone); err != nil {
		t.Fatalf("RecordResult again: %v", err)
	}
	if got := mustReceipts(t, s, 0)[4].Result; got != loop.IterDone {
		t.Errorf("Result after a second RecordResult = %q, want %q", got, loop.IterDone)
	}
}

// sameInstant compares times by instant, to the microsecond.
func sameInstant(a, b time.Time) bool {
	return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
}
