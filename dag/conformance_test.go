package dag

import (
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

func seedStore(t *testing.T, seeds []looptest.Seed, now func() time.Time) loop.TaskStore {
	t.Helper()
	s := newTestStore(t, now)
	batch := make([]ImportTask, len(seeds))
	features := map[string]bool{}
	for i, sd := range seeds {
		if sd.Feature != "" && !features[sd.Feature] {
			features[sd.Feature] = true
			if _, err := s.AddFeature(t.Context(), FeatureParams{Name: sd.Feature}); err != nil {
				t.Fatalf("AddFeature: %v", err)
			}
		}
		batch[i] = ImportTask{Line: i + 1, ID: sd.ID, Title: sd.Title, Description: sd.Description,
			Priority: sd.Priority, ParentID: sd.ParentID, BlockedBy: sd.BlockedBy, Status: sd.Status,
			Feature: sd.Feature, Check: sd.Check, CheckBy: sd.CheckBy}
	}
	if _, err := s.Import(t.Context(), batch); err != nil {
		t.Fatalf("Import: %v", err)
	}
	// Runs before the store is closed: cleanups run last-registered first.
	t.Cleanup(func() { checkCounts(t, s) })
	return s
}

func TestConformance(t *testing.T) {
	looptest.TestTaskStore(t, seedStore)
}

func TestLandingConformance(t *testing.T) {
	looptest.TestLandingStore(t, seedStore)
}

func TestRunRecorderConformance(t *testing.T) {
	looptest.TestRunRecorder(t, seedStore)
}

func TestReceiptStoreConformance(t *testing.T) {
	looptest.TestReceiptStore(t, seedStore)
}
