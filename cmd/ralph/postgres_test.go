package main

import (
	"os"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
)

// TestCLIOnPostgres runs the CLI's tests of every `ralph task …` command,
// of init, status, build and plan once more with the plan on PostgreSQL
// (--db, --plan): ARCHITECTURE.md §6 wants them to behave the same on both
// stores. Tests that look at the SQLite file itself, copy a project
// (clone) or run the binary are not among them.
func TestCLIOnPostgres(t *testing.T) { cliOnServer(t, pgtest.URL(t)) }

// TestCLIThroughPgBouncer is TestCLIOnPostgres with the server reached
// through PgBouncer in transaction pooling (dag/postgres, pooler.go), as
// managed PostgreSQL often is.
func TestCLIThroughPgBouncer(t *testing.T) {
	url, _ := pgtest.Pooled(t)
	cliOnServer(t, url)
}

func cliOnServer(t *testing.T, url string) {
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"TaskWorkflow", TestTaskWorkflow},
		{"TaskShow", TestTaskShow},
		{"TaskListJSON", TestTaskListJSON},
		{"PeekGolden", TestPeekGolden},
		{"ClaimTakesTheCriticalPath", TestClaimTakesTheCriticalPath},
		{"PeekPrintsNothingWhenNothingIsClaimable", TestPeekPrintsNothingWhenNothingIsClaimable},
		{"ClaimAgent", TestClaimAgent},
		{"ClaimLease", TestClaimLease},
		{"ReadCommandsRecoverExpiredLeases", TestReadCommandsRecoverExpiredLeases},
		{"ImportExport", TestImportExport},
		{"ImportBeadsList", TestImportBeadsList},
		{"ImportChecklist", TestImportChecklist},
		{"ImportChecklistAddsOnlyWhatIsNew", TestImportChecklistAddsOnlyWhatIsNew},
		{"ImportJSONLStaysStrict", TestImportJSONLStaysStrict},
		{"ImportNothing", TestImportNothing},
		{"Features", TestFeatures},
		{"FlagsAfterPositionals", TestFlagsAfterPositionals},
		{"ImportParentAfterChild", TestImportParentAfterChild},
		{"WhoMayMoveTask", TestWhoMayMoveTask},
		{"BuildOutcomes", TestBuildOutcomes},
		{"BuildNothingToDo", TestBuildNothingToDo},
		{"BuildDryRun", TestBuildDryRun},
		{"BuildSessionLog", TestBuildSessionLog},
		{"BuildUsageLimitStop", TestBuildUsageLimitStop},
		{"StatusAfterBuild", TestStatusAfterBuild},
		{"PlanTurnsSpecIntoTasks", TestPlanTurnsSpecIntoTasks},
		{"PlanOutcomes", TestPlanOutcomes},
		{"PlanFeature", TestPlanFeature},
		{"InitIsIdempotent", TestInitIsIdempotent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			harnessServer = url
			t.Cleanup(func() { harnessServer = "" })
			tc.fn(t)
		})
	}
}

// TestFeatureFilesShared: on a server, the feature specs and plans are
// stored with the plan, so a second machine's project gets them, and a
// plan one machine changed reaches the other (ARCHITECTURE.md §6).
func TestFeatureFilesShared(t *testing.T) {
	harnessServer = pgtest.URL(t)
	t.Cleanup(func() { harnessServer = "" })
	a := initHarness(t)
	spec := a.write("specs/auth.md", "# Auth\nLog people in.\n")
	a.ok("feature", "add", "auth", "--spec", spec)

	b := newHarness(t)
	b.db, b.plan = a.db, a.plan
	b.ok("init")
	agent, _ := fakeAgentPath(t, agentStep{Text: done})
	a.add("Login", "--feature", "auth")
	if r := b.build(t.Context(), agent, "--dry-run"); r.code != 0 {
		t.Fatalf("build --dry-run on machine b: exit %d, %s", r.code, r.stderr)
	}
	if got := b.read(".ralph/features/auth/spec.md"); got != "# Auth\nLog people in.\n" {
		t.Errorf("machine b's spec.md = %q; want machine a's", got)
	}
	// Machine b's plan changes (later than the stored copy): it is
	// stored by b's next command that syncs, and a gets it.
	path := b.write(".ralph/features/auth/plan.md", "# Plan: auth\n1. Login form\n")
	later := time.Now().Add(time.Minute)
	os.Chtimes(path, later, later)
	if r := b.build(t.Context(), agent, "--dry-run"); r.code != 0 {
		t.Fatalf("build --dry-run on machine b: exit %d, %s", r.code, r.stderr)
	}
	if r := a.build(t.Context(), agent, "--dry-run"); r.code != 0 {
		t.Fatalf("build --dry-run on machine a: exit %d, %s", r.code, r.stderr)
	}
	if got := a.read(".ralph/features/auth/plan.md"); got != "# Plan: auth\n1. Login form\n" {
		t.Errorf("machine a's plan.md = %q; want machine b's", got)
	}
}
