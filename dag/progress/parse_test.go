package progress

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ralph-dev/ralph/sigil"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goodFiles are the progress files in testdata (every *.md).
func goodFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	return files
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t *testing.T, src []byte) *Doc {
	t.Helper()
	d, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return d
}

// golden compares got with the golden file, or rewrites it under -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// dump renders what Parse read, for golden files.
func dump(d *Doc) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "name: %q\nstatus: %q\ndone: %v\nfinished: %v\n", d.Name, d.Status, d.Done, d.Finished())
	fmt.Fprintf(&b, "items:\n")
	for _, it := range d.Items {
		kind := "[ ]"
		switch {
		case it.Phase:
			kind = "phase"
		case it.Checked:
			kind = "[x]"
		}
		fmt.Fprintf(&b, "  line %d %s %s parent=%q title=%q\n", it.Line, kind, it.ID, it.Parent, it.Title)
		if it.Description != "" {
			fmt.Fprintf(&b, "    description=%q\n", it.Description)
		}
	}
	fmt.Fprintf(&b, "attempts:\n")
	for _, a := range d.Attempts {
		fmt.Fprintf(&b, "  %d tried=%q result=%q next=%q\n", a.Iteration, a.Tried, a.Result, a.Next)
	}
	fmt.Fprintf(&b, "log:\n")
	for _, r := range d.Log {
		fmt.Fprintf(&b, "  line %d %q\n", r.Line, r.Cells)
	}
	return b.Bytes()
}

// TestParseGolden parses every testdata file and compares what it read with
// testdata/<name>.parse.golden.
func TestParseGolden(t *testing.T) {
	for _, path := range goodFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			d := mustParse(t, readFile(t, path))
			golden(t, strings.TrimSuffix(path, ".md")+".parse.golden", dump(d))
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string // the error text
	}{
		{"empty", "", `progress: line 1: empty document: a progress file starts with "# Progress: <name>"`},
		{"blank", "\n\n  \n", `progress: line 3: empty document: a progress file starts with "# Progress: <name>"`},
		{"readme", "# My project\n\n## Tasks\n- [ ] a\n",
			`progress: line 1: want "# Progress: <name>" as the first line, got "# My project"`},
		{"text first", "\nSome notes\n# Progress: x\n## Tasks\n",
			`progress: line 2: want "# Progress: <name>" as the first line, got "Some notes"`},
		{"level 2 title", "## Progress: x\n## Tasks\n",
			`progress: line 1: want "# Progress: <name>" as the first line, got "## Progress: x"`},
		{"title in a fence", "```\n# Progress: x\n```\n## Tasks\n",
			`progress: line 1: want "# Progress: <name>" as the first line, got "` + "```" + `"`},
		{"no name", "# Progress:   \n## Tasks\n", `progress: line 1: the "# Progress:" heading has no name`},
		{"no tasks section", "# Progress: x\n## Status\nIn Progress\n- [ ] a\n",
			`progress: line 4: no "## Tasks" section in the document`},
		{"tasks only in a fence", "# Progress: x\n```\n## Tasks\n```\n",
			`progress: line 4: no "## Tasks" section in the document`},
		{"two tasks sections", "# Progress: x\n## Tasks\n- [ ] a\n## Notes\n## tasks\n- [ ] b\n",
			`progress: line 5: a second "## Tasks" section (the first is on line 2)`},
		{"two titles", "# Progress: x\n## Tasks\n# Progress: y\n",
			`progress: line 3: a second "# Progress:" heading (the first is on line 1)`},
		{"unclosed fence", "# Progress: x\n## Tasks\n- [ ] a\n```go\n- [ ] b\n",
			"progress: line 4: code fence \"```\" is never closed"},
		{"unclosed comment", "# Progress: x\n## Tasks\n- [ ] a\n<!--\n- [ ] b\n",
			`progress: line 4: HTML comment "<!--" is never closed (no "-->")`},
		{"unclosed pre", "# Progress: x\n## Tasks\n- [ ] a\n<PRE>\n- [ ] b\n",
			`progress: line 4: HTML block "<PRE" is never closed (no "</pre>")`},
		{"fence closed by the wrong char", "# Progress: x\n## Tasks\n~~~\n- [ ] b\n```\n",
			`progress: line 3: code fence "~~~" is never closed`},
		{"empty box", "# Progress: x\n## Tasks\n- [ ] a\n- [x]   \n", `progress: line 4: a checkbox with no task text`},
		{"id twice", "# Progress: x\n## Tasks\n### Phase 1: a <!-- id: a -->\n- [ ] a <!-- id: a -->\n",
			`progress: line 4: id "a" is already used on line 3`},
		{"empty id", "# Progress: x\n## Tasks\n- [ ] a <!-- id: -->\n",
			`progress: line 3: id marker "<!-- id: -->": want <!-- id: ID --> with an id of one word`},
		{"box with only an id", "# Progress: x\n## Tasks\n- [ ] <!-- id: a -->\n", `progress: line 3: a checkbox with no task text`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %s", dump(d))
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if !errors.Is(err, ErrNotProgressFile) {
				t.Errorf("error %v does not wrap ErrNotProgressFile", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Errorf("error %v is not a *ParseError with a line", err)
			}
		})
	}
}

func TestParseByteOrderMark(t *testing.T) {
	src := []byte("\ufeff# Progress: bom\n## Tasks\n- [ ] a\n")
	d := mustParse(t, src)
	out, err := d.tick("a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("\ufeff# Progress: bom\n## Tasks\n- [x] a\n", string(out)); diff != "" {
		t.Errorf("tick (-want +got):\n%s", diff)
	}
}

// TestParseDone covers where RALPH_DONE counts.
func TestParseDone(t *testing.T) {
	const head = "# Progress: x\n"
	const tasks = "## Tasks\n- [ ] a\n"
	tests := []struct {
		name string
		doc  string
		want bool
	}{
		{"alone in Status", head + "## Status\nRALPH_DONE\n" + tasks, true},
		{"indented and padded", head + "## Status\n   RALPH_DONE \t\n" + tasks, true},
		{"after the status text", head + "## Status\nComplete\n\nRALPH_DONE\n" + tasks, true},
		{"Status after Tasks", head + tasks + "## status\nRALPH_DONE\n", true},
		{"with other words", head + "## Status\nRALPH_DONE soon\n" + tasks, false},
		{"lowercase", head + "## Status\nralph_done\n" + tasks, false},
		{"in bold", head + "## Status\n**RALPH_DONE**\n" + tasks, false},
		{"in a fence in Status", head + "## Status\n```\nRALPH_DONE\n```\n" + tasks, false},
		{"in a comment in Status", head + "## Status\n<!-- RALPH_DONE -->\n" + tasks, false},
		{"in indented code in Status", head + "## Status\nIn Progress\n\n    RALPH_DONE\n" + tasks, false},
		{"in an HTML block in Status", head + "## Status\n<div>\nRALPH_DONE\n</div>\n\n" + tasks, false},
		{"in a task's text", head + "## Status\nIn Progress\n## Tasks\n- [ ] RALPH_DONE\n", false},
		{"alone in Tasks", head + "## Status\nIn Progress\n" + tasks + "RALPH_DONE\n", false},
		{"before Status", head + "RALPH_DONE\n## Status\nIn Progress\n" + tasks, false},
		{"in another section", head + tasks + "## Notes\nRALPH_DONE\n", false},
		{"under a level-3 heading in Status", head + "## Status\n### Detail\nRALPH_DONE\n" + tasks, true},
		{"after Status ended", head + "## Status\nIn Progress\n## Other\nRALPH_DONE\n" + tasks, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, []byte(tt.doc))
			if d.Done != tt.want {
				t.Errorf("Done = %v, want %v", d.Done, tt.want)
			}
			if d.Finished() != tt.want {
				t.Errorf("Finished = %v, want %v (one box, unchecked)", d.Finished(), tt.want)
			}
		})
	}
}

func TestBox(t *testing.T) {
	type result struct {
		Off     int
		Checked bool
		Title   string
		OK      bool
	}
	tests := []struct {
		line string
		want result
	}{
		{"- [ ] task", result{3, false, "task", true}},
		{"- [x] task", result{3, true, "task", true}},
		{"- [X] task", result{3, true, "task", true}},
		{"  * [ ]  spaced  ", result{5, false, "spaced", true}},
		{"+ [ ] plus", result{3, false, "plus", true}},
		{"12. [ ] numbered", result{5, false, "numbered", true}},
		{"3) [x] paren", result{4, true, "paren", true}},
		{"-\t[ ]\ttabs", result{3, false, "tabs", true}},
		{"- [ ]", result{3, false, "", true}},
		{"- [2026-01-29] a date", result{}},
		{"- [ ]x glued", result{}},
		{"- [x]: colon", result{}},
		{"- [y] other letter", result{}},
		{"- [] empty brackets", result{}},
		{"[ ] no marker", result{}},
		{"-[ ] no space", result{}},
		{"a. [ ] letter marker", result{}},
		{"1234567890. [ ] ten digits", result{}},
		{"- [link](x)", result{}},
		{"", result{}},
		{"    - [ ] indented code", result{}},
		{"> - [ ] quoted", result{}},
		{"- - [ ] nested", result{5, false, "nested", true}},
		{"-     [ ] code in the item", result{}},
		{"- [\t] tab in the box", result{}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			var got result
			if lines, err := scan(tt.line); err == nil && len(lines) > 0 && lines[0].kind == lineBox {
				off := int(lines[0].box)
				got = result{off, tt.line[off] != ' ', strings.TrimSpace(tt.line[off+2:]), true}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("box(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

func TestHeading(t *testing.T) {
	type result struct {
		Level int
		Text  string
	}
	tests := []struct {
		line string
		want result
	}{
		{"# Progress: x", result{1, "Progress: x"}},
		{"## Tasks ##", result{2, "Tasks"}},
		{"### Phase 1: Setup", result{3, "Phase 1: Setup"}},
		{"   ## Indented", result{2, "Indented"}},
		{"    ## Code", result{}},
		{"##Tasks", result{}},
		{"####### seven", result{}},
		{"## C#", result{2, "C#"}},
		{"###", result{3, ""}},
		{"## Status:", result{2, "Status:"}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			var got result
			got.Level, got.Text = heading(tt.line)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("heading(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Add a task", "add-a-task"},
		{"Add `--dry-run` to **build**", "add-dry-run-to-build"},
		{"Don't panic!", "dont-panic"},
		{"  Ünïcode été  ", "ünïcode-été"},
		{"***", "task"},
		{"Fix #12: crash on [2026-01-29]", "fix-12-crash-on-2026-01-29"},
		{strings.Repeat("word ", 20), "word-word-word-word-word-word-word-word-word"},
		{strings.Repeat("x", 60), strings.Repeat("x", 48)},
		// Within 64 bytes too, so that an imported id fits a git ref
		// (dag.MaxIDBytes): 21 three-byte runes, cut at a word boundary
		// when there is one in the second half.
		{strings.Repeat("漢", 30), strings.Repeat("漢", 21)},
		{strings.Repeat("漢", 12) + " " + strings.Repeat("字", 20), strings.Repeat("漢", 12)},
		{strings.Repeat("é", 40), strings.Repeat("é", 32)},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := slug(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("slug (-want +got):\n%s", diff)
			}
			if n := len([]rune(got)); n > maxSlug {
				t.Errorf("slug has %d runes, more than %d", n, maxSlug)
			}
			if len(got) > maxSlugBytes {
				t.Errorf("slug has %d bytes, more than %d", len(got), maxSlugBytes)
			}
		})
	}
}

// TestIDsSurviveEdits checks that ids do not move when boxes are ticked,
// tasks are inserted above, or phases are reordered.
func TestIDsSurviveEdits(t *testing.T) {
	base := "# Progress: x\n## Tasks\n### Phase 1: A\n- [ ] One\n- [ ] Two\n### Phase 2: B\n- [ ] Three\n"
	ids := func(doc string) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, it := range mustParse(t, []byte(doc)).Items {
			out[it.Title] = it.ID
		}
		return out
	}
	want := ids(base)
	tests := []struct{ name, doc string }{
		{"ticked", strings.ReplaceAll(base, "[ ]", "[x]")},
		{"inserted above", strings.Replace(base, "- [ ] One", "- [ ] Zero\n- [ ] One", 1)},
		{"phases reordered", "# Progress: x\n## Tasks\n### Phase 2: B\n- [ ] Three\n### Phase 1: A\n- [ ] One\n- [ ] Two\n"},
		{"notes added", strings.Replace(base, "- [ ] Two", "- [ ] Two\n  with a note", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ids(tt.doc)
			delete(got, "Zero")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
}

// changedRegion returns the byte range of old that differs from new: the
// part between their common prefix and common suffix.
func changedRegion(old, new []byte) (start, oldEnd int) {
	p := 0
	for p < len(old) && p < len(new) && old[p] == new[p] {
		p++
	}
	s := 0
	for s < len(old)-p && s < len(new)-p && old[len(old)-1-s] == new[len(new)-1-s] {
		s++
	}
	return p, len(old) - s
}

// sectionBytes is the byte range of a section of d, or [len, len) when it
// is missing (new sections are added at the end or before Iteration Log).
func sectionBytes(d *Doc, s Section) (int, int) {
	sp, ok := d.sections[s]
	if !ok {
		return -1, -1
	}
	end := len(d.src)
	if sp.to < len(d.lines) {
		end = d.lines[sp.to].start
	}
	return d.lines[sp.from].start, end
}

// TestRoundTrip edits every testdata file the ways the store does and
// checks that (1) the edit changes bytes only inside the part ralph owns,
// (2) parsing the result gives the same tasks, changed only as intended,
// and (3) the final file matches testdata/<name>.edited.golden.
func TestRoundTrip(t *testing.T) {
	started := time.Date(2026, 1, 29, 10, 0, 0, 0, time.UTC)
	ignore := cmpopts.IgnoreUnexported(Item{})
	for _, path := range goodFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src := readFile(t, path)
			d := mustParse(t, src)
			want := d.Items

			// Tick every box, one at a time.
			for i, it := range want {
				if it.Phase || it.Checked {
					continue
				}
				out, err := d.tick(it.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(out) != len(d.src) {
					t.Fatalf("tick %s changed the length", it.ID)
				}
				if s, e := changedRegion([]byte(d.src), []byte(out)); e-s != 1 || s != it.box {
					t.Fatalf("tick %s changed bytes [%d,%d), want only the box at %d", it.ID, s, e, it.box)
				}
				d = mustParse(t, []byte(out))
				want[i].Checked = true
				if diff := cmp.Diff(want, d.Items, ignore); diff != "" {
					t.Fatalf("items after ticking %s (-want +got):\n%s", it.ID, diff)
				}
			}

			// Append log rows: only the Iteration Log changes.
			for n := 1; n <= 2; n++ {
				before := d
				out := d.appendIteration(IterationRow{Iteration: 10 + n, Started: started, Duration: 90 * time.Second,
					TasksCompleted: n, Notes: "row | with a pipe\nand a newline"})
				d = mustParse(t, []byte(out))
				checkOnlySection(t, before, []byte(out), SectionLog)
				if diff := cmp.Diff(before.Items, d.Items, ignore); diff != "" {
					t.Fatalf("items after a log row (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(append(before.Log, LogRow{}), d.Log, cmpopts.IgnoreFields(LogRow{}, "Line", "Cells")); diff != "" {
					t.Fatalf("log rows (-want +got):\n%s", diff)
				}
				last := d.Log[len(d.Log)-1].Cells
				wantCells := []string{fmt.Sprint(10 + n), "2026-01-29T10:00:00Z", "1m30s", fmt.Sprint(n), "row | with a pipe and a newline"}
				if diff := cmp.Diff(wantCells, last); diff != "" {
					t.Fatalf("new row (-want +got):\n%s", diff)
				}
			}

			// Add attempts: only Recent Attempts changes, at most 5 remain.
			for n := 1; n <= 6; n++ {
				before := d
				out := d.addAttempt(Attempt{Iteration: 20 + n, Tried: "try " + fmt.Sprint(n), Result: "line one\nline two", Next: ""}, KeepAttempts)
				d = mustParse(t, []byte(out))
				checkOnlySection(t, before, []byte(out), SectionAttempts)
				if diff := cmp.Diff(before.Items, d.Items, ignore); diff != "" {
					t.Fatalf("items after an attempt (-want +got):\n%s", diff)
				}
				wantAttempts := append(before.Attempts, Attempt{Iteration: 20 + n, Tried: "try " + fmt.Sprint(n), Result: "line one\nline two"})
				if len(wantAttempts) > KeepAttempts {
					wantAttempts = wantAttempts[len(wantAttempts)-KeepAttempts:]
				}
				if diff := cmp.Diff(wantAttempts, d.Attempts); diff != "" {
					t.Fatalf("attempts (-want +got):\n%s", diff)
				}
			}
			golden(t, strings.TrimSuffix(path, ".md")+".edited.golden", []byte(d.src))
		})
	}
}

// checkOnlySection fails unless new differs from before only inside the
// section s: with the section cut out of both, the bytes must be equal.
func checkOnlySection(t *testing.T, before *Doc, new []byte, s Section) {
	t.Helper()
	after := mustParse(t, new)
	nfrom, nto := sectionBytes(after, s)
	if nfrom < 0 {
		t.Fatalf("the new file has no %s section:\n%s", s, new)
	}
	from, to := sectionBytes(before, s)
	if from < 0 {
		// Cutting the new section out must give the old file back, up to
		// the line breaks put before the section to separate it.
		cut := append(slices.Clone(new[:nfrom]), new[nto:]...)
		p, e := changedRegion([]byte(before.src), cut)
		added := cut[p : p+len(cut)-len(before.src)]
		if p != e || strings.Trim(string(added), "\r\n") != "" {
			t.Fatalf("adding section %s changed more than it added: old [%d,%d) became %q", s, p, e, added)
		}
		return
	}
	if diff := cmp.Diff(string(before.src[:from]), string(new[:nfrom])); diff != "" {
		t.Fatalf("bytes before section %s changed (-old +new):\n%s", s, diff)
	}
	if diff := cmp.Diff(string(before.src[to:]), string(new[nto:])); diff != "" {
		t.Fatalf("bytes after section %s changed (-old +new):\n%s", s, diff)
	}
}

func TestChecklist(t *testing.T) {
	ignore := cmpopts.IgnoreUnexported(Item{})
	tests := []struct {
		name string
		doc  string
		want []Item
	}{
		{
			name: "plain checklist",
			doc: "# My plan\n\nIntro.\n- [ ] Loose task\n\n## Backend\n- [ ] API\n  with notes\n- [x] Schema\n\n" +
				"## Empty heading\n\n### Frontend\n```\n- [ ] in code\n```\n- [ ] Page\n",
			want: []Item{
				{ID: "my-plan", Title: "My plan", Phase: true, Line: 1},
				{ID: "loose-task", Title: "Loose task", Parent: "my-plan", Line: 4},
				{ID: "backend", Title: "Backend", Phase: true, Line: 6},
				{ID: "api", Title: "API", Description: "with notes", Parent: "backend", Line: 7},
				{ID: "schema", Title: "Schema", Parent: "backend", Checked: true, Line: 9},
				{ID: "frontend", Title: "Frontend", Phase: true, Line: 13},
				{ID: "page", Title: "Page", Parent: "frontend", Line: 17},
			},
		},
		{
			name: "boxes before any heading",
			doc:  "- [ ] One\n- [ ] One\n",
			want: []Item{
				{ID: "one", Title: "One", Line: 1},
				{ID: "one-2", Title: "One", Line: 2},
			},
		},
		{
			name: "progress file: only the Tasks section",
			doc: "# Progress: p\n## Status\n- [ ] not this\n## Tasks\n### Phase 1: Setup\n- [ ] A\n### Phase 2: More\n- [x] B\n" +
				"## Completed This Iteration\n- [x] not this\n",
			want: []Item{
				{ID: "phase-1", Title: "Setup", Phase: true, Line: 5},
				{ID: "a", Title: "A", Parent: "phase-1", Line: 6},
				{ID: "phase-2", Title: "More", Phase: true, Line: 7},
				{ID: "b", Title: "B", Parent: "phase-2", Checked: true, Line: 8},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Checklist([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, ignore); diff != "" {
				t.Errorf("Checklist (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChecklistErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
		is   error
	}{
		{"no boxes", "# Notes\n\nJust text.\n- a list\n", `progress: no checklist items: no "- [ ] task" line in 4 lines`, ErrNoChecklist},
		{"boxes only in code", "```\n- [ ] x\n```\n", `progress: no checklist items: no "- [ ] task" line in 3 lines`, ErrNoChecklist},
		{"empty box", "# Plan\n- [ ] a\n- [ ]\n", "progress: line 3: a checkbox with no task text", ErrBadChecklist},
		{"unclosed fence", "# Plan\n```\n- [ ] a\n", "progress: line 2: code fence \"```\" is never closed", ErrNotProgressFile},
		{"progress file without boxes", "# Progress: p\n## Tasks\n### Phase 1: x\n", `progress: line 2: the Tasks section has no "- [ ] task" boxes`, ErrNoChecklist},
		{"broken progress file", "# Progress: p\n## Status\n", `progress: line 2: no "## Tasks" section in the document`, ErrNotProgressFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Checklist([]byte(tt.doc))
			if err == nil {
				t.Fatal("Checklist succeeded")
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %v does not wrap %v", err, tt.is)
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	src := bigFile(50, 20)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Parse(src); err != nil {
			b.Fatal(err)
		}
	}
}

// bigFile renders a progress file with phases×tasks boxes, half ticked, and
// full attempts and log sections.
func bigFile(phases, tasks int) []byte {
	var b bytes.Buffer
	b.WriteString("# Progress: big\n\n## Status\nIn Progress\n\n## Tasks\n")
	for p := 1; p <= phases; p++ {
		fmt.Fprintf(&b, "\n### Phase %d: part %d\n", p, p)
		for i := 1; i <= tasks; i++ {
			mark := " "
			if i%2 == 0 {
				mark = "x"
			}
			fmt.Fprintf(&b, "- [%s] Task %d of phase %d\n  A note about task %d.\n", mark, i, p, i)
		}
	}
	b.WriteString("\n## Recent Attempts\n")
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&b, "### Iteration %d\n- Tried: x\n- Result: y\n- Next: z\n\n", i)
	}
	b.WriteString("## Iteration Log\n" + logHeader[0] + "\n" + logHeader[1] + "\n")
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "| %d | 2026-01-29T10:00:00Z | 1m0s | 1 | ok |\n", i)
	}
	return b.Bytes()
}

// TestRalphDoneAgreesWithSigil checks the per-line rule against package
// sigil, which the loop uses on agent text.
func TestRalphDoneAgreesWithSigil(t *testing.T) {
	for _, line := range []string{"RALPH_DONE", "  RALPH_DONE\t", "RALPH_DONE.", "ralph_done", "**RALPH_DONE**",
		"`RALPH_DONE`", "RALPH_DONE RALPH_DONE", "x RALPH_DONE", ""} {
		if got, want := isRalphDone(line), sigil.RalphDone(line); got != want {
			t.Errorf("isRalphDone(%q) = %v, sigil.RalphDone = %v", line, got, want)
		}
	}
}

// TestCommonMark reads task lists as CommonMark (and GitHub) render them:
// a checkbox in an indented code block, a fenced block, an HTML block or
// comment, or a block quote is not a task; a task list item nested under
// another list item is. Each case gives the Tasks section and the titles
// of the boxes that must be read from it.
func TestCommonMark(t *testing.T) {
	tests := []struct {
		name  string
		tasks string // the Tasks section's body
		want  []string
	}{
		{"indented code block after a paragraph and a blank line",
			"- [ ] Real task\n\nAn example of a task:\n\n    - [ ] Example in indented code\n\n- [ ] Next real task\n",
			[]string{"Real task", "Next real task"}},
		{"indented code block at the top of the section",
			"\n    - [ ] Example\n    - [x] Done example\n- [ ] Real task\n", []string{"Real task"}},
		{"indented code block by a tab", "Example:\n\n\t- [ ] Example\n\n- [ ] Real task\n", []string{"Real task"}},
		{"four spaces under a paragraph continue it", "Some text\n    - [ ] part of the paragraph\n", nil},
		{"four spaces under a box nest a box", "- [ ] Parent\n\n    - [ ] Child after a blank line\n", []string{"Parent", "Child after a blank line"}},
		{"nested under a box", "- [ ] Parent\n  - [ ] Child\n    - [x] Grandchild\n", []string{"Parent", "Child", "Grandchild"}},
		{"nested under a plain item", "- Backend\n  - [ ] API\n  - [ ] Schema\n", []string{"API", "Schema"}},
		{"nested under an ordered item", "1. Backend\n   - [ ] API\n", []string{"API"}},
		{"nested on the same line", "- - [ ] Inner\n", []string{"Inner"}},
		{"five spaces after the marker make code", "-     [ ] code in the item\n", nil},
		{"tab after the marker", "-\t[ ] Tabbed\n", []string{"Tabbed"}},
		{"fence", "```\n- [ ] in a fence\n```\n- [ ] Real task\n", []string{"Real task"}},
		{"fence in a list item ends with the item", "- [ ] First\n  ```sh\n  - [ ] in code\n- [ ] Second\n", []string{"First", "Second"}},
		{"fence indented four spaces is code, not a fence", "Text\n\n    ```\n- [ ] Real task\n", []string{"Real task"}},
		{"closing fence indented four spaces does not close", "```\n    ```\n- [ ] still in the fence\n```\n- [ ] Real task\n", []string{"Real task"}},
		{"HTML block", "<details>\n<summary>Later</summary>\n- [ ] hidden in the HTML block\n</details>\n\n- [ ] Real task\n", []string{"Real task"}},
		{"markdown between HTML tags", "<details>\n\n- [ ] Shown as a task\n\n</details>\n", []string{"Shown as a task"}},
		{"HTML block of a custom tag", "<my-note>\n- [ ] hidden\n\n- [ ] Real task\n", []string{"Real task"}},
		{"pre block", "<pre>\n- [ ] hidden\n\n- [ ] still hidden\n</pre>\n- [ ] Real task\n", []string{"Real task"}},
		{"HTML comment", "<!--\n- [ ] commented out\n\n- [ ] still commented out\n-->\n- [ ] Real task\n", []string{"Real task"}},
		{"one-line comment", "<!-- - [ ] commented out --> trailing\n- [ ] Real task\n", []string{"Real task"}},
		{"block quote", "> - [ ] quoted\n> - [ ] quoted too\n- [ ] Real task\n", []string{"Real task"}},
		{"lazy line of a block quote", "> Quoted text\ncontinued lazily - [ ] not a box\n- [ ] Real task\n", []string{"Real task"}},
		{"block quote in a list item", "- [ ] Task\n  > - [ ] quoted in the item\n", []string{"Task"}},
		{"ordered item other than 1 cannot interrupt a paragraph", "Text\n2. [ ] part of the paragraph\n", nil},
		{"ordered item 1 interrupts a paragraph", "Text\n1. [ ] Interrupts\n", []string{"Interrupts"}},
		{"thematic break is not a heading under a list", "- [ ] A\n---\n- [ ] B\n", []string{"A", "B"}},
		{"setext heading ends the Tasks section", "- [ ] A\n\nNotes\n-----\n- [ ] under Notes\n", []string{"A"}},
		{"link reference definition", "[x]: https://example.com\n- [x]: /url\n- [ ] Real task\n", []string{"Real task"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "# Progress: x\n\n## Tasks\n" + tt.tasks + "\n## Notes\n- [ ] not in Tasks\n"
			d, err := Parse([]byte(doc))
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, doc)
			}
			var got []string
			for _, it := range d.Tasks() {
				got = append(got, it.Title)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tasks (-want +got):\n%s\n%s", diff, doc)
			}
			for _, it := range d.Tasks() {
				if b := doc[it.box]; b != ' ' && b != 'x' && b != 'X' {
					t.Errorf("task %s: byte %d is %q, not the box", it.ID, it.box, b)
				}
			}
		})
	}
}

// TestSetextSections: a setext heading is a heading, so "Tasks" over a
// line of dashes is the Tasks section, and a paragraph over "---" is no
// longer Status text.
func TestSetextSections(t *testing.T) {
	d := mustParse(t, []byte("# Progress: x\n\nStatus\n------\nIn Progress\n\nTasks\n-----\n- [ ] A\n\nIteration Log\n---\n| Iteration | Notes |\n|---|---|\n| 1 | a |\n---\n\n## Notes\ntext\n"))
	if d.Status != "In Progress" {
		t.Errorf("Status = %q", d.Status)
	}
	if len(d.Tasks()) != 1 || d.Tasks()[0].Title != "A" {
		t.Errorf("tasks: %+v", d.Tasks())
	}
	if len(d.Log) != 1 {
		t.Errorf("log rows: %+v (a table followed by a thematic break is still a table)", d.Log)
	}
	d = mustParse(t, []byte("# Progress: x\n## Status\nRALPH_DONE\n---\n## Tasks\n- [ ] A\n"))
	if d.Done {
		t.Error(`"RALPH_DONE" over "---" is a heading, not Status text, but Done is true`)
	}
}
