package progress

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// TestConformance runs the TaskStore suite against a Store over a file
// rendered from the seeds. The options name what a progress file cannot
// express: blockers and the blocked status, priorities (file order is the
// order), features, phases inside phases, and per-task checks.
func TestConformance(t *testing.T) {
	looptest.TestTaskStore(t, newConformanceStore,
		looptest.WithoutDependencies(),
		looptest.WithoutPriorities(),
		looptest.WithoutFeatures(),
		looptest.WithoutNesting(),
		looptest.WithoutChecks(),
	)
}

func newConformanceStore(t *testing.T, seeds []looptest.Seed, now func() time.Time) loop.TaskStore {
	t.Helper()
	doc, failed := renderSeeds(t, seeds)
	path := filepath.Join(t.TempDir(), "progress.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{Now: now})
	if err != nil {
		t.Fatalf("Open over\n%s\n%v", doc, err)
	}
	for _, id := range failed {
		s.failed[id] = true // a failed status lives in memory only
	}
	return s
}

// renderSeeds writes a progress file holding seeds, with explicit ids: a
// seed with children is a phase, followed by its children; a top-level
// seed after a phase goes under a heading that ends the phase. It returns
// the ids seeded as failed.
func renderSeeds(t *testing.T, seeds []looptest.Seed) (string, []string) {
	t.Helper()
	children := map[string][]looptest.Seed{}
	for _, sd := range seeds {
		if sd.ParentID != "" {
			children[sd.ParentID] = append(children[sd.ParentID], sd)
		}
	}
	var b strings.Builder
	var failed []string
	b.WriteString("# Progress: conformance\n\n## Status\nIn Progress\n\n## Tasks\n")
	box := func(sd looptest.Seed) {
		mark := " "
		switch sd.Status {
		case "", loop.StatusPending:
		case loop.StatusDone:
			mark = "x"
		case loop.StatusFailed:
			failed = append(failed, sd.ID)
		default:
			t.Fatalf("seed %s: a progress file cannot hold status %s", sd.ID, sd.Status)
		}
		fmt.Fprintf(&b, "- [%s] %s <!-- id: %s -->\n", mark, sd.Title, sd.ID)
		if sd.Description != "" {
			for _, l := range strings.Split(sd.Description, "\n") {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
	}
	inPhase, phases := false, 0
	for _, sd := range seeds {
		kids := children[sd.ID]
		switch {
		case sd.ParentID != "":
			continue // written under its parent
		case len(kids) > 0:
			if sd.Status != "" && sd.Status != loop.StatusPending {
				t.Fatalf("seed %s: a phase's status follows its boxes; cannot seed %s", sd.ID, sd.Status)
			}
			phases++
			fmt.Fprintf(&b, "\n### Phase %d: %s <!-- id: %s -->\n", phases, sd.Title, sd.ID)
			for _, k := range kids {
				if len(children[k.ID]) > 0 {
					t.Fatalf("seed %s: phases cannot nest", k.ID)
				}
				box(k)
			}
			inPhase = true
		default:
			if inPhase {
				b.WriteString("\n### More tasks\n")
				inPhase = false
			}
			box(sd)
		}
	}
	b.WriteString("\n## Recent Attempts\n\n## Iteration Log\n")
	return b.String(), failed
}
