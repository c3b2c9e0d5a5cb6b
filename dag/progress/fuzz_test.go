package progress

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParse checks, for any input that parses, that every edit ralph makes
// gives a document that parses again with the same tasks (ticked where
// ticked), that the store's in-place update after a tick is what parsing
// the ticked file gives, and that Checklist never panics.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.md"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("# Progress: x\n## Tasks\n- [ ] a"))
	ignore := cmpopts.IgnoreUnexported(Item{})
	f.Fuzz(func(t *testing.T, src []byte) {
		_, _ = Checklist(src)
		lines, _ := scan(string(src))
		s := &source{src: string(src), lines: lines}
		for i, l := range lines {
			if i > 0 && l.start <= lines[i-1].start {
				t.Fatalf("line %d starts at %d, line %d at %d", i+1, l.start, i, lines[i-1].start)
			}
			if at := s.textStart(i) + int(l.box); l.kind == lineBox && (src[at-1] != '[' || src[at+1] != ']') {
				t.Fatalf("line %d: box at %d is not between brackets: %q", i+1, at, s.text(i))
			}
		}
		d, err := parse(string(src), false)
		if err != nil {
			return
		}
		reparse := func(what string, out string, want []Item) *Doc {
			t.Helper()
			nd, err := parse(out, false)
			if err != nil {
				t.Fatalf("%s made the document unparsable: %v\n%q", what, err, out)
			}
			if diff := cmp.Diff(want, nd.Items, ignore, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("%s changed the tasks (-want +got):\n%s\n%q", what, diff, out)
			}
			return nd
		}
		reparse("appendIteration", d.appendIteration(IterationRow{Iteration: 1, Started: time.Unix(0, 0).UTC(), Notes: "n"}), d.Items)
		nd := reparse("addAttempt", d.addAttempt(Attempt{Iteration: 2, Tried: "t\nu", Result: "r"}, KeepAttempts), d.Items)
		if len(nd.Attempts) > KeepAttempts && len(d.Attempts) < KeepAttempts {
			t.Fatalf("addAttempt left %d attempts", len(nd.Attempts))
		}
		nd = reparse("logIteration", nd.logIteration(IterationRow{Iteration: 3, Notes: "n"}, 2), d.Items)
		if len(nd.Attempts) > 2 {
			t.Fatalf("logIteration left %d attempts, want at most 2", len(nd.Attempts))
		}
		want := append([]Item(nil), d.Items...)
		for i, it := range d.Items {
			if it.Phase {
				continue
			}
			out, err := d.tick(it.ID)
			if err != nil {
				t.Fatal(err)
			}
			want[i].Checked = true
			nd := reparse("tick "+it.ID, out, want)
			d.ticked(it.ID, out)
			if diff := cmp.Diff(nd, d, cmp.AllowUnexported(Doc{}, Item{}, source{}, line{}, span{})); diff != "" {
				t.Fatalf("ticked %s differs from parsing the ticked file (-parsed +ticked):\n%s", it.ID, diff)
			}
		}
	})
}
