package dag

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

// jsonlTask is one line of ralph's JSON Lines format: the
// fields of import and export, nothing else.
type jsonlTask struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Priority    *int     `json:"priority"`
	Parent      *string  `json:"parent"`
	BlockedBy   []string `json:"blocked_by"`
	Status      string   `json:"status"`
	// Feature is not one of the documented keys: it is written only when set,
	// so that export → import keeps a task's feature.
	Feature string `json:"feature,omitempty"`
	// Check is the task's check command and CheckBy the agent that wrote
	// it (loop.Task.Check, CheckBy), each written only when set.
	Check   string `json:"check,omitempty"`
	CheckBy string `json:"check_by,omitempty"`
}

// beadsIssue is the part of a beads issue (a line of `bd export`, an
// element of `bd list --json`) that maps onto a ralph task. Every other
// beads field is ignored.
type beadsIssue struct {
	ID                 string            `json:"id"`
	Title              string            `json:"title"`
	Description        string            `json:"description"`
	Design             string            `json:"design"`
	AcceptanceCriteria string            `json:"acceptance_criteria"`
	Notes              string            `json:"notes"`
	Status             string            `json:"status"`
	Priority           *int              `json:"priority"`
	IssueType          string            `json:"issue_type"`
	Dependencies       []beadsDependency `json:"dependencies"`
	// Parent is the parent-child edge's other end, which `bd list --json`
	// and `bd show --json` (beads 1.x) also give on its own.
	Parent string `json:"parent"`
	// Pinned marks a persistent context bead, not a work item (1.x).
	Pinned bool `json:"pinned"`
	// Check is no beads field: a line may carry ralph's check with it.
	Check string `json:"check"`
}

// beadsDependency is one edge: issue_id depends on depends_on_id (`bd
// export`, `bd list --json`), or — in `bd show --json` — the issue
// depended on itself, with its id and the edge's dependency_type.
type beadsDependency struct {
	IssueID        string `json:"issue_id"`
	DependsOnID    string `json:"depends_on_id"`
	Type           string `json:"type"`
	ID             string `json:"id"`
	DependencyType string `json:"dependency_type"`
}

// ReadJSONL reads tasks in JSON Lines, one task a line, numbering each
// ImportTask with its line (from 1). Blank lines are skipped.
//
// A line is either ralph's format — the keys id, title, description,
// priority, parent, blocked_by, status and, optionally, feature, check
// (the task's check command) and check_by (the agent that wrote it); an
// unknown key is an error, so a typo cannot silently drop data — or a beads issue
// as written
// by `bd export` (recognised by beads-only keys such as dependencies or
// issue_type), mapped as follows: status open → pending, in_progress →
// pending, blocked and deferred → blocked, closed → done, tombstone (a
// deleted issue) → skipped, with the references other issues make to it
// (other statuses are an error);
// priority kept (both are "lower first"); a "blocks" dependency →
// blocked_by; a "parent-child" dependency → parent; design, acceptance
// criteria and notes are appended to the description under headings; a
// check key (no beads field) is the task's check; other dependency types
// and every other field are dropped.
//
// Priority absent means DefaultPriority; parent null or "" means none;
// status absent means pending, and in_progress becomes pending (a claim
// does not survive an import); beads' open and closed are accepted as
// pending and done in either format. Checks that need the whole plan (duplicate
// ids, unknown parents or blockers, cycles) are Store.Import's.
//
// Errors name the line: "line 3: …". ReadJSONL holds every task in
// memory; NewJSONLSource reads the same format as a stream, for
// Store.ImportFrom.
func ReadJSONL(r io.Reader) ([]ImportTask, error) {
	jr := newJSONLReader(r)
	var tasks []ImportTask
	for {
		t, err := jr.next()
		if errors.Is(err, io.EOF) {
			return dropDeleted(tasks, jr.deleted), nil
		}
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
}

// jsonlReader reads JSON Lines one task at a time.
type jsonlReader struct {
	br *bufio.Reader
	n  int // the line last read
	// deleted holds the ids of the beads tombstones read so far.
	deleted map[string]bool
	eof     bool
}

func newJSONLReader(r io.Reader) *jsonlReader {
	return &jsonlReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next task, or io.EOF after the last.
func (r *jsonlReader) next() (ImportTask, error) {
	for !r.eof {
		r.n++
		line, err := r.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return ImportTask{}, fmt.Errorf("line %d: %w", r.n, err)
		}
		r.eof = err != nil
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		t, perr := parseLine(trimmed)
		switch {
		case errors.Is(perr, errSkipLine):
		case errors.Is(perr, errTombstone):
			if r.deleted == nil {
				r.deleted = map[string]bool{}
			}
			r.deleted[tombstoneID(trimmed)] = true
		case perr != nil:
			return ImportTask{}, fmt.Errorf("line %d: %w", r.n, perr)
		default:
			t.Line = r.n
			return t, nil
		}
	}
	return ImportTask{}, io.EOF
}

// JSONLSource is JSON Lines in ReadJSONL's format as a TaskSource: each
// pass reads the input again from where it stood when the source was
// made, a line at a time, so that an import of any size holds no more of
// it than a line.
type JSONLSource struct {
	rs      io.ReadSeeker
	start   int64
	deleted map[string]bool
}

// NewJSONLSource returns a source reading rs from its current offset.
func NewJSONLSource(rs io.ReadSeeker) (*JSONLSource, error) {
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	return &JSONLSource{rs: rs, start: start}, nil
}

// Tasks implements TaskSource.
func (s *JSONLSource) Tasks() iter.Seq2[ImportTask, error] {
	return func(yield func(ImportTask, error) bool) {
		if _, err := s.rs.Seek(s.start, io.SeekStart); err != nil {
			yield(ImportTask{}, err)
			return
		}
		jr := newJSONLReader(s.rs)
		for {
			t, err := jr.next()
			if errors.Is(err, io.EOF) {
				s.deleted = jr.deleted
				return
			}
			if !yield(t, err) || err != nil {
				return
			}
		}
	}
}

// Dropped implements TaskSource: the ids of the beads issues the last
// complete pass found deleted (tombstones).
func (s *JSONLSource) Dropped() []string {
	out := make([]string, 0, len(s.deleted))
	for id := range s.deleted {
		out = append(out, id)
	}
	return out
}

// errTombstone marks a beads line of an issue that is no task — deleted
// (a 0.x tombstone) or pinned (1.x: a persistent context bead) — which
// is skipped, with the references other issues make to it.
var errTombstone = errors.New("deleted beads issue")

// errSkipLine marks a line that holds no issue: a beads 1.x memory
// (`bd export --include-memories`: "_type": "memory") or schema line.
var errSkipLine = errors.New("no issue")

func tombstoneID(line []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(line, &v) // parsed once already
	return strings.TrimSpace(v.ID)
}

// dropDeleted removes the references tasks make to deleted beads issues.
func dropDeleted(tasks []ImportTask, deleted map[string]bool) []ImportTask {
	if len(deleted) == 0 {
		return tasks
	}
	for i := range tasks {
		t := &tasks[i]
		if deleted[t.ParentID] {
			t.ParentID = ""
		}
		if len(t.BlockedBy) > 0 {
			kept := t.BlockedBy[:0:0]
			for _, b := range t.BlockedBy {
				if !deleted[b] {
					kept = append(kept, b)
				}
			}
			t.BlockedBy = kept
		}
	}
	return tasks
}

func parseLine(line []byte) (ImportTask, error) {
	if line[0] != '{' {
		return ImportTask{}, errors.New("not a JSON object (want one task a line)")
	}
	if jt, ok := parseFast(line); ok {
		return fromJSONL(jt)
	}
	var jt jsonlTask
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	err := dec.Decode(&jt)
	if err == nil {
		if dec.More() {
			return ImportTask{}, errors.New("more than one JSON value on the line")
		}
		return fromJSONL(jt)
	}
	if strings.HasPrefix(err.Error(), "json: unknown field") {
		if t, ok, berr := parseBeads(line); ok {
			return t, berr
		}
	}
	return ImportTask{}, jsonError(err)
}

// jsonError turns encoding/json's messages into ones that read well after
// "line N: ".
func jsonError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if errors.Is(err, io.ErrUnexpectedEOF) {
		msg = "invalid JSON: unexpected end of line"
	}
	return errors.New(msg)
}

func fromJSONL(jt jsonlTask) (ImportTask, error) {
	t := ImportTask{
		ID:          strings.TrimSpace(jt.ID),
		Title:       jt.Title,
		Description: jt.Description,
		Priority:    DefaultPriority,
		BlockedBy:   jt.BlockedBy,
		Feature:     strings.TrimSpace(jt.Feature),
		Check:       strings.TrimSpace(jt.Check),
		CheckBy:     checkAuthor(strings.TrimSpace(jt.Check), strings.TrimSpace(jt.CheckBy)),
	}
	if jt.Priority != nil {
		t.Priority = *jt.Priority
	}
	if jt.Parent != nil {
		t.ParentID = strings.TrimSpace(*jt.Parent)
	}
	st, err := importStatus(jt.Status)
	if err != nil {
		return ImportTask{}, err
	}
	t.Status = st
	return t, checkImportTask(t)
}

func importStatus(s string) (loop.Status, error) {
	switch s {
	case "", string(loop.StatusInProgress), "open":
		return loop.StatusPending, nil
	case "closed":
		return loop.StatusDone, nil
	}
	st, err := loop.ParseStatus(s)
	if err != nil {
		return "", fmt.Errorf("unknown status %q (want pending, in_progress, done, failed or blocked)", s)
	}
	return st, nil
}

func checkImportTask(t ImportTask) error {
	if t.ID == "" {
		return errors.New("missing id")
	}
	if strings.TrimSpace(t.Title) == "" {
		return fmt.Errorf("task %s: missing title", t.ID)
	}
	for _, b := range t.BlockedBy {
		if strings.TrimSpace(b) == "" {
			return fmt.Errorf("task %s: empty id in blocked_by", t.ID)
		}
	}
	return nil
}

// parseBeads decodes a beads issue line; ok is false when the line does not
// look like one (no beads-only key), so the caller reports its own error.
func parseBeads(line []byte) (t ImportTask, ok bool, err error) {
	var raw map[string]json.RawMessage
	if json.Unmarshal(line, &raw) != nil {
		return ImportTask{}, false, nil
	}
	if kind, ok := raw["_type"]; ok {
		// beads 1.0.3 and later tag each export line.
		if string(kind) != `"issue"` {
			return ImportTask{}, true, errSkipLine
		}
	} else if _, schema := raw["_schema"]; schema {
		return ImportTask{}, true, errSkipLine
	} else {
		_, deps := raw["dependencies"]
		_, typ := raw["issue_type"]
		if !deps && !typ {
			return ImportTask{}, false, nil
		}
	}
	var bi beadsIssue
	if err := json.Unmarshal(line, &bi); err != nil {
		return ImportTask{}, true, fmt.Errorf("beads issue: %w", jsonError(err))
	}
	t, err = fromBeads(bi)
	return t, true, err
}

// fromBeads maps a beads issue onto a task (see ReadJSONL).
func fromBeads(bi beadsIssue) (ImportTask, error) {
	t := ImportTask{
		ID:          strings.TrimSpace(bi.ID),
		Title:       bi.Title,
		Description: beadsDescription(bi),
		Priority:    DefaultPriority,
		Check:       strings.TrimSpace(bi.Check),
	}
	if bi.Priority != nil {
		t.Priority = *bi.Priority
	}
	switch bi.Status {
	case "", "open", "in_progress", "hooked":
		t.Status = loop.StatusPending
	case "blocked":
		t.Status = loop.StatusBlocked
	case "deferred":
		t.Status = loop.StatusBlocked
	case "closed":
		t.Status = loop.StatusDone
	case "tombstone", "pinned":
		return ImportTask{}, errTombstone
	default:
		return ImportTask{}, fmt.Errorf("beads issue %s: status %q has no ralph equivalent (want open, in_progress, hooked, blocked, deferred, closed, pinned or tombstone; set it to one of them with bd update)", t.ID, bi.Status)
	}
	if bi.Pinned {
		return ImportTask{}, errTombstone
	}
	parent := func(id string) error {
		if t.ParentID != "" && t.ParentID != id {
			return fmt.Errorf("beads issue %s: two parents (%s and %s)", t.ID, t.ParentID, id)
		}
		t.ParentID = id
		return nil
	}
	for _, d := range bi.Dependencies {
		if d.IssueID != "" && d.IssueID != bi.ID {
			continue // an edge recorded on the other end; not this issue's
		}
		on, kind := d.DependsOnID, d.Type
		if on == "" && kind == "" { // bd show --json: the issue depended on
			on, kind = d.ID, d.DependencyType
		}
		switch kind {
		case "blocks", "waits-for":
			t.BlockedBy = append(t.BlockedBy, on)
		case "parent-child":
			if err := parent(on); err != nil {
				return ImportTask{}, err
			}
		case "conditional-blocks":
			// It runs only if on fails: ralph has no such edge, and
			// keeps it for a person to decide.
			if t.Status == loop.StatusPending {
				t.Status = loop.StatusBlocked
			}
			t.Description = strings.TrimSpace(t.Description + "\n\n(beads: to run only if " + on + " fails)")
		}
	}
	if p := strings.TrimSpace(bi.Parent); p != "" {
		if err := parent(p); err != nil {
			return ImportTask{}, err
		}
	}
	return t, checkImportTask(t)
}

func beadsDescription(bi beadsIssue) string {
	parts := []string{strings.TrimSpace(bi.Description)}
	for _, s := range []struct{ head, body string }{
		{"Design", bi.Design},
		{"Acceptance criteria", bi.AcceptanceCriteria},
		{"Notes", bi.Notes},
	} {
		if b := strings.TrimSpace(s.body); b != "" {
			parts = append(parts, "## "+s.head+"\n\n"+b)
		}
	}
	return strings.TrimSpace(strings.Join(parts, "\n\n"))
}

// WriteJSONL writes tasks in ralph's JSON Lines format, one a line, with
// the keys in the order id, title, description, priority, parent,
// blocked_by, status, then feature, check and check_by only for a task
// that has them; parent is
// null when the task has none and blocked_by is [] when it has no
// blockers. ReadJSONL reads it back unchanged.
func WriteJSONL(w io.Writer, tasks []ImportTask) error {
	jw := newJSONLWriter(w)
	for _, t := range tasks {
		if err := jw.write(t); err != nil {
			return err
		}
	}
	return jw.bw.Flush()
}

// jsonlWriter writes tasks as WriteJSONL does, one at a time.
type jsonlWriter struct {
	bw  *bufio.Writer
	enc *json.Encoder
}

func newJSONLWriter(w io.Writer) *jsonlWriter {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &jsonlWriter{bw: bw, enc: enc}
}

func (w *jsonlWriter) write(t ImportTask) error {
	jt := jsonlTask{
		ID:          t.ID,
		Title:       t.Title,
		Description: t.Description,
		Priority:    &t.Priority,
		BlockedBy:   t.BlockedBy,
		Status:      string(t.Status),
		Feature:     t.Feature,
		Check:       t.Check,
		CheckBy:     checkAuthor(t.Check, t.CheckBy),
	}
	if t.ParentID != "" {
		jt.Parent = &t.ParentID
	}
	if jt.BlockedBy == nil {
		jt.BlockedBy = []string{}
	}
	if err := w.enc.Encode(jt); err != nil {
		return fmt.Errorf("task %s: %w", t.ID, err)
	}
	return nil
}
