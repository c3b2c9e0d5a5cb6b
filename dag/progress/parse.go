package progress

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ErrNotProgressFile is wrapped by the errors Parse returns for a document
// that is not a progress file. The wrapping *ParseError names the line.
var ErrNotProgressFile = errors.New("progress: not a progress file")

// ErrBadChecklist is wrapped by the errors Checklist returns for plain
// markdown it cannot read.
var ErrBadChecklist = errors.New("progress: bad checklist")

// ParseError reports where and why a document is not a valid progress file
// (or checklist). Line counts from 1.
type ParseError struct {
	Line int
	Msg  string
	// Err is the kind of failure: ErrNotProgressFile, ErrBadChecklist or
	// ErrNoChecklist.
	Err error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("progress: line %d: %s", e.Line, e.Msg)
}

// Unwrap returns e.Err, for errors.Is.
func (e *ParseError) Unwrap() error { return e.Err }

func errorAt(line int, format string, args ...any) error {
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, args...), Err: ErrNotProgressFile}
}

// Item is one entry of a checklist: a phase heading, which groups the boxes
// under it and becomes a parent task, or a checkbox, which is a task.
type Item struct {
	// ID is derived from the text (see the package doc); it is unique in
	// the document and does not change when the box is ticked.
	ID string
	// Title is the heading text ("Phase 1: Setup") or the box text.
	Title string
	// Description holds the indented lines under a box (notes, sub-bullets
	// that are not boxes), dedented; "" for phases.
	Description string
	// Parent is the ID of the phase the box sits in, or "" (phases, and
	// boxes before the first phase heading).
	Parent string
	// Phase is true for a phase heading.
	Phase bool
	// Checked is true for a ticked box ("[x]" or "[X]"); false for phases.
	Checked bool
	// Line is the 1-based line of the heading or box.
	Line int

	// explicit is true when ID was given by an "<!-- id: X -->" marker;
	// until assignIDs, ID holds that id, or the one to derive from.
	explicit bool
	box      int // byte offset of the character between the brackets; -1 for phases
}

// Attempt is one block of the Recent Attempts section:
//
//	### Iteration <n>
//	- Tried: …
//	- Result: …
//	- Next: …
type Attempt struct {
	Iteration int
	Tried     string
	Result    string
	Next      string
}

// LogRow is one data row of the Iteration Log table, cell by cell, as
// written (trimmed; `\|` unescaped).
type LogRow struct {
	Line  int
	Cells []string
}

// Section names a level-2 section of a progress file that ralph reads.
type Section string

// The sections of a progress file, in their usual order.
const (
	SectionStatus    Section = "Status"
	SectionTasks     Section = "Tasks"
	SectionCompleted Section = "Completed This Iteration"
	SectionAttempts  Section = "Recent Attempts"
	SectionLog       Section = "Iteration Log"
)

// Sections lists the sections ralph knows, in their usual order.
func Sections() []Section {
	return []Section{SectionStatus, SectionTasks, SectionCompleted, SectionAttempts, SectionLog}
}

// Doc is a parsed progress file. It keeps the source bytes and the byte
// ranges of what it parsed, so that edits change only the bytes they mean
// to change.
type Doc struct {
	// Name is the text after "# Progress:".
	Name string
	// Status is the first non-blank line of the Status section ("" if none).
	Status string
	// Done is true when RALPH_DONE stands alone on a line of the Status
	// section (outside code and HTML blocks).
	Done bool
	// Items are the phases and boxes of the Tasks section, in file order.
	Items []Item
	// Attempts are the "### Iteration <n>" blocks of Recent Attempts, in
	// file order.
	Attempts []Attempt
	// Log holds the data rows of the Iteration Log table, in file order.
	Log []LogRow

	source
	sections map[Section]span // heading line index .. end line index (exclusive)
	attempts []span           // line ranges of the attempt blocks
	logLast  int              // index of the last table line of Iteration Log, -1 if none
	crlf     bool
}

// span is a half-open range of line indexes.
type span struct{ from, to int }

// Tasks returns the boxes (not the phases), in file order.
func (d *Doc) Tasks() []Item {
	var out []Item
	for _, it := range d.Items {
		if !it.Phase {
			out = append(out, it)
		}
	}
	return out
}

// Bytes returns (a copy of) the source the Doc was parsed from.
func (d *Doc) Bytes() []byte { return []byte(d.src) }

// Finished reports whether the run is over according to the file:
// RALPH_DONE in Status, or at least one box and every box checked.
func (d *Doc) Finished() bool {
	if d.Done {
		return true
	}
	n := 0
	for _, it := range d.Items {
		if it.Phase {
			continue
		}
		if !it.Checked {
			return false
		}
		n++
	}
	return n > 0
}

// item returns the item with the given id.
func (d *Doc) item(id string) (Item, bool) {
	for _, it := range d.Items {
		if it.ID == id {
			return it, true
		}
	}
	return Item{}, false
}

// Parse parses a progress file in the format the package doc describes. It
// requires the "# Progress: <name>" heading as the first non-blank line and a
// "## Tasks" section; every other section is optional. Errors are *ParseError
// values naming the line, wrapping ErrNotProgressFile.
func Parse(data []byte) (*Doc, error) { return parse(string(data), true) }

// parse parses src; the Log rows only when rows is true (the store needs
// just where the table ends, and the rows of a long log cost more memory
// than the file).
func parse(src string, rows bool) (*Doc, error) {
	lines, err := scan(src)
	if err != nil {
		return nil, err
	}
	d := &Doc{source: source{src: src, lines: lines}, sections: map[Section]span{}, logLast: -1}
	d.crlf = len(lines) > 0 && d.next(0)-d.end(0) == 2

	// The title.
	first := -1
	for i, l := range lines {
		if l.kind == lineBlank || l.kind == lineComment {
			continue
		}
		first = i
		break
	}
	if first < 0 {
		return nil, errorAt(max(len(lines), 1), "empty document: a progress file starts with \"# Progress: <name>\"")
	}
	lvl, text := heading(d.text(first))
	name, ok := strings.CutPrefix(text, "Progress:")
	if lines[first].kind != lineHeading || lvl != 1 || !ok {
		return nil, errorAt(first+1, "want \"# Progress: <name>\" as the first line, got %q", clip(d.text(first)))
	}
	d.Name = strings.TrimSpace(name)
	if d.Name == "" {
		return nil, errorAt(first+1, "the \"# Progress:\" heading has no name")
	}

	// The sections: every level-1 or level-2 heading starts one; those ralph
	// knows are recorded, others are user text.
	var cur Section
	curFrom := -1
	closeSection := func(to int) {
		if cur != "" {
			d.sections[cur] = span{curFrom, to}
		}
		cur = ""
	}
	for i := first + 1; i < len(lines); i++ {
		l := lines[i]
		if l.kind != lineHeading || l.level > 2 {
			continue
		}
		text := d.headingText(i)
		closeSection(i)
		if l.level == 1 {
			if _, ok := strings.CutPrefix(text, "Progress:"); ok {
				return nil, errorAt(i+1, "a second \"# Progress:\" heading (the first is on line %d)", first+1)
			}
			continue
		}
		s, known := sectionNamed(text)
		if !known {
			continue
		}
		if prev, dup := d.sections[s]; dup {
			return nil, errorAt(i+1, "a second \"## %s\" section (the first is on line %d)", s, prev.from+1)
		}
		cur, curFrom = s, i
	}
	closeSection(len(lines))
	if _, ok := d.sections[SectionTasks]; !ok {
		return nil, errorAt(len(lines), "no \"## Tasks\" section in the document")
	}

	d.parseStatus()
	if err := d.parseTasks(); err != nil {
		return nil, err
	}
	d.parseAttempts()
	d.parseLog(rows)
	return d, nil
}

func (d *Doc) parseStatus() {
	sp, ok := d.sections[SectionStatus]
	if !ok {
		return
	}
	for i := sp.from + 1; i < sp.to; i++ {
		if k := d.lines[i].kind; k == lineBlank || k == lineSetext || d.lines[i].inert() {
			continue
		}
		t := strings.TrimSpace(d.text(i))
		if t == "" {
			continue
		}
		if d.Status == "" {
			d.Status = t
		}
		if isRalphDone(t) {
			d.Done = true
		}
	}
}

func (d *Doc) parseTasks() error {
	sp := d.sections[SectionTasks]
	items, err := collectItems(&d.source, sp.from+1, sp.to, true)
	if err != nil {
		return err
	}
	d.Items = items
	return nil
}

// phaseHeading matches "Phase <N>: <name>" (the separator may be ":", ".",
// ")", a dash, or nothing).
var phaseHeading = regexp.MustCompile(`(?i)^phase\s+(\d+)\b\s*(?:[:.)\-–—]\s*)?(.*)$`)

// idMarker matches an explicit id at the end of a box's or heading's text.
var idMarker = regexp.MustCompile(`\s*<!--\s*id:\s*(\S*?)\s*-->\s*$`)

// collectItems reads boxes and phases from lines [from, to). In a progress
// file (progressFile true), only level-3 "Phase N: name" headings are
// phases, and any other level-3 heading ends the current phase; in a plain
// checklist every heading starts a group. Groups without boxes are
// dropped. It assigns the ids.
func collectItems(s *source, from, to int, progressFile bool) ([]Item, error) {
	n := 0
	for i := from; i < to; i++ {
		if k := s.lines[i].kind; k == lineBox || k == lineHeading {
			n++
		}
	}
	items := make([]Item, 0, n)
	parents := make([]int32, 0, n) // index in items of each item's phase, -1 none
	phase := -1                    // index in items of the current phase, -1 none
	phaseHasBox := false
	endPhase := func() {
		if phase >= 0 && !phaseHasBox {
			items, parents = items[:phase], parents[:phase]
		}
		phase = -1
	}
	for i := from; i < to; i++ {
		l := s.lines[i]
		if l.kind == lineHeading && (!progressFile || l.level == 3) {
			endPhase()
			text, id, err := cutID(s.headingText(i), i+1)
			if err != nil {
				return nil, err
			}
			it := Item{ID: id, Title: text, Phase: true, Line: i + 1, box: -1, explicit: id != ""}
			num := 0
			if m := phaseHeading.FindStringSubmatch(text); m != nil {
				num, _ = strconv.Atoi(m[1])
				if name := strings.TrimSpace(m[2]); name != "" {
					it.Title = name
				}
			} else if progressFile || text == "" {
				continue // not a phase: the boxes below have no parent
			}
			switch {
			case it.explicit:
			case num > 0:
				it.ID = "phase-" + strconv.Itoa(num)
			default:
				it.ID = slug(it.Title)
			}
			items = append(items, it)
			parents = append(parents, -1)
			phase, phaseHasBox = len(items)-1, false
			continue
		}
		if l.kind != lineBox {
			continue
		}
		text := s.text(i)
		title, id, err := cutID(strings.TrimSpace(text[l.box+2:]), i+1)
		if err != nil {
			return nil, err
		}
		if title == "" {
			return nil, errorAt(i+1, "a checkbox with no task text")
		}
		it := Item{ID: id, Title: title, Checked: text[l.box] != ' ', Line: i + 1, box: s.textStart(i) + int(l.box), explicit: id != ""}
		if !it.explicit {
			it.ID = slug(title)
		}
		if phase >= 0 {
			phaseHasBox = true
		}
		it.Description = description(s, i, to)
		items = append(items, it)
		parents = append(parents, int32(phase))
	}
	endPhase()
	if err := assignIDs(items); err != nil {
		return nil, err
	}
	for i, p := range parents {
		if p >= 0 {
			items[i].Parent = items[p].ID
		}
	}
	return items, nil
}

// cutID splits an explicit id marker "<!-- id: X -->" off the end of text.
func cutID(text string, line int) (string, string, error) {
	if !strings.HasSuffix(strings.TrimRight(text, " \t"), "-->") {
		return text, "", nil // the common case, without the regexp
	}
	loc := idMarker.FindStringSubmatchIndex(text)
	if loc == nil {
		return text, "", nil
	}
	id := text[loc[2]:loc[3]]
	if id == "" || strings.ContainsAny(id, "<>") {
		return "", "", errorAt(line, "id marker %q: want <!-- id: ID --> with an id of one word", strings.TrimSpace(text[loc[0]:]))
	}
	return strings.TrimSpace(text[:loc[0]]), id, nil
}

// description gathers the lines under the box on line i that are indented
// deeper than it and are not boxes or headings, dedented; blank lines
// between them are kept.
func description(s *source, i, to int) string {
	base := indent(s.text(i))
	first, last, cut := -1, -1, -1 // the lines kept, their least indentation
	for j := i + 1; j < to; j++ {
		text := s.text(j)
		if strings.TrimSpace(text) == "" {
			continue
		}
		n := indent(text)
		if k := s.lines[j].kind; n <= base || k == lineHeading || k == lineBox {
			break
		}
		if first < 0 {
			first = j
		}
		last = j
		if cut < 0 || n < cut {
			cut = n
		}
	}
	if first < 0 {
		return ""
	}
	if first == last {
		return strings.TrimRight(s.text(first)[cut:], " \t")
	}
	var b strings.Builder
	for j := first; j <= last; j++ {
		if j > first {
			b.WriteByte('\n')
		}
		if text := s.text(j); strings.TrimSpace(text) != "" {
			b.WriteString(strings.TrimRight(text[cut:], " \t"))
		}
	}
	return b.String()
}

func (d *Doc) parseAttempts() {
	sp, ok := d.sections[SectionAttempts]
	if !ok {
		return
	}
	open := -1 // line index of the current attempt heading
	var cur Attempt
	field := (*string)(nil)
	closeBlock := func(to int) {
		if open >= 0 {
			d.Attempts = append(d.Attempts, cur)
			d.attempts = append(d.attempts, span{open, to})
		}
		open, field = -1, nil
	}
	for i := sp.from + 1; i < sp.to; i++ {
		l := d.lines[i]
		if l.inert() || l.kind == lineSetext {
			continue
		}
		if l.kind == lineHeading && l.level == 3 {
			closeBlock(i)
			if n, ok := iterationHeading(d.headingText(i)); ok {
				open, cur = i, Attempt{Iteration: n}
			}
			continue
		}
		if open < 0 {
			continue
		}
		text := d.text(i)
		t := strings.TrimSpace(text)
		if rest, ok := cutBullet(t); ok && indent(text) == 0 {
			field = nil
			k, v, _ := strings.Cut(rest, ":")
			v = strings.TrimLeft(v, "*_")
			switch strings.ToLower(strings.Trim(k, "*_ \t")) {
			case "tried":
				field = &cur.Tried
			case "result":
				field = &cur.Result
			case "next":
				field = &cur.Next
			}
			if field != nil {
				*field = strings.TrimSpace(v)
			}
			continue
		}
		if field != nil && t != "" && indent(text) > 0 {
			*field += "\n" + t
		}
	}
	closeBlock(sp.to)
}

func (d *Doc) parseLog(rows bool) {
	sp, ok := d.sections[SectionLog]
	if !ok {
		return
	}
	isRow := func(i int) (string, bool) {
		if l := d.lines[i]; l.inert() || l.kind == lineSetext {
			return "", false
		}
		t := strings.TrimSpace(d.text(i))
		return t, strings.HasPrefix(t, "|")
	}
	if !rows {
		for i := sp.to - 1; i > sp.from && d.logLast < 0; i-- {
			if _, ok := isRow(i); ok {
				d.logLast = i
			}
		}
		return
	}
	n := 0
	for i := sp.from + 1; i < sp.to; i++ {
		t, ok := isRow(i)
		if !ok {
			continue
		}
		d.logLast = i
		n++
		cells := splitRow(t)
		if n == 1 || isSeparatorRow(cells) {
			continue // the header, the |---| line
		}
		d.Log = append(d.Log, LogRow{Line: i + 1, Cells: cells})
	}
}

// cutBullet removes a leading "- " or "* ".
func cutBullet(t string) (string, bool) {
	if rest, ok := strings.CutPrefix(t, "- "); ok {
		return rest, true
	}
	return strings.CutPrefix(t, "* ")
}

// splitRow splits a table row into trimmed cells, honouring `\|`.
func splitRow(t string) []string {
	t = strings.TrimPrefix(t, "|")
	var cells []string
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		switch {
		case t[i] == '\\' && i+1 < len(t) && t[i+1] == '|':
			b.WriteByte('|')
			i++
		case t[i] == '|':
			cells = append(cells, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(t[i])
		}
	}
	if rest := strings.TrimSpace(b.String()); rest != "" {
		cells = append(cells, rest)
	}
	return cells
}

func isSeparatorRow(cells []string) bool {
	if len(cells) == 0 {
		return false
	}
	for _, c := range cells {
		if strings.Trim(c, ":-") != "" || !strings.Contains(c, "-") {
			return false
		}
	}
	return true
}

// isRalphDone is sigil.RalphDone for one line that is not in a code fence:
// RALPH_DONE alone, surrounding whitespace allowed.
func isRalphDone(line string) bool { return strings.TrimSpace(line) == "RALPH_DONE" }

// iterationHeading parses "Iteration <n>" (case-insensitive; anything after
// the number, like a date, is allowed).
func iterationHeading(text string) (int, bool) {
	f := strings.Fields(text)
	if len(f) < 2 || !strings.EqualFold(f[0], "iteration") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimRight(f[1], ":.,"))
	if err != nil {
		return 0, false
	}
	return n, true
}

func sectionNamed(text string) (Section, bool) {
	for _, s := range Sections() {
		if strings.EqualFold(strings.TrimRight(text, ": "), string(s)) {
			return s, true
		}
	}
	return "", false
}

// heading returns the level and text of an ATX heading ("## Tasks" → 2,
// "Tasks"), or 0 when s is not a heading.
func heading(s string) (int, string) {
	t := strings.TrimLeft(s, " ")
	if len(s)-len(t) > 3 {
		return 0, ""
	}
	n := len(t) - len(strings.TrimLeft(t, "#"))
	if n == 0 || n > 6 {
		return 0, ""
	}
	rest := t[n:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return 0, ""
	}
	rest = strings.TrimSpace(rest)
	if strings.Trim(rest, "#") == "" {
		return n, ""
	}
	if trimmed := strings.TrimRight(rest, "#"); trimmed != rest && strings.HasSuffix(trimmed, " ") {
		rest = strings.TrimSpace(trimmed)
	}
	return n, rest
}

// indent is the number of leading spaces and tabs of s.
func indent(s string) int {
	return len(s) - len(strings.TrimLeft(s, " \t"))
}

func clip(s string) string {
	const max = 60
	r := []rune(s)
	if len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}
