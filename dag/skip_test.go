package dag

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/loop"
)

func TestSkipPresent(t *testing.T) {
	existing := []loop.Task{{ID: "t-1", Title: "Polish"}, {ID: "setup", Title: "Setup"}}
	in := []ImportTask{
		{Line: 1, ID: "setup", Title: "Set up"},                    // same id: present
		{Line: 2, ID: "polish", Title: "Polish"},                   // same title: present, is t-1
		{Line: 3, ID: "shine", Title: "Shine", ParentID: "polish"}, // parent follows the match
		{Line: 4, ID: "ship", Title: "Ship", BlockedBy: []string{"polish", "shine", "setup"}},
	}
	add, present := SkipPresent(existing, in)
	wantAdd := []ImportTask{
		{Line: 3, ID: "shine", Title: "Shine", ParentID: "t-1"},
		{Line: 4, ID: "ship", Title: "Ship", BlockedBy: []string{"t-1", "shine", "setup"}},
	}
	if diff := cmp.Diff(wantAdd, add); diff != "" {
		t.Errorf("add (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(in[:2], present); diff != "" {
		t.Errorf("present (-want +got):\n%s", diff)
	}
	if in[3].BlockedBy[0] != "polish" {
		t.Errorf("SkipPresent changed its input: %v", in[3].BlockedBy)
	}
}
