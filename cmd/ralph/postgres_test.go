package main

import (
	"testing"

	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
)

// TestCLIOnPostgres runs the CLI's tests of every `ralph task …` command,
// of init, status, build and plan once more with the plan on PostgreSQL
// (--db, --plan): DESIGN §10 wants them to behave the same on both
// stores. Tests that look at the SQLite file itself, copy a project
// (clone) or run the binary are not among them.
func TestCLIOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"TaskWorkflow", TestTaskWorkflow},
		{"TaskShow", TestTaskShow},
		{"TaskListJSON", TestTaskListJSON},
		{"PeekGolden", TestPeekGolden},
		{"PeekPrintsNothingWhenNothingIsClaimable", TestPeekPrintsNothingWhenNothingIsClaimable},
		{"ClaimAgent", TestClaimAgent},
		{"ClaimLease", TestClaimLease},
		{"ReadCommandsRecoverExpiredLeases", TestReadCommandsRecoverExpiredLeases},
		{"ImportExport", TestImportExport},
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
