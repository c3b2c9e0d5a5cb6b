package progress

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoChecklist: Checklist found no checkbox at all.
var ErrNoChecklist = errors.New("progress: no checklist items")

// Checklist reads the tasks of a markdown checklist, for importing them
// into the task graph (`ralph task import FILE.md`). It accepts:
//
//   - a full progress file (first line "# Progress: <name>"): the phases and
//     boxes of its Tasks section, exactly as Parse reads them (errors and
//     all);
//   - any other markdown: every box outside code, HTML blocks and block
//     quotes (read as in a progress file, see the package doc),
//     grouped under the nearest heading above it (of any level). A heading
//     with boxes directly under it becomes a phase, the parent of those
//     boxes; headings without boxes are dropped; boxes before any heading
//     have no parent. Nesting of headings or of list items does not nest
//     tasks: the result has at most two levels, like a progress file.
//
// The items come in file order, each phase before its boxes, so inserting
// them in that order with equal priority makes the file order the ready
// order. Ids are derived as in a progress file (see the package doc). A
// document without any box is an error wrapping ErrNoChecklist; a box
// without text or an unclosed code fence is a *ParseError naming the line.
func Checklist(data []byte) ([]Item, error) {
	src := string(data)
	lines, err := scan(src)
	s := &source{src: src, lines: lines}
	if s.isProgressFile() {
		d, err := Parse(data)
		if err != nil {
			return nil, err
		}
		if len(d.Tasks()) == 0 {
			return nil, errorAtNoBox(d.sections[SectionTasks].from + 1)
		}
		return d.Items, nil
	}
	if err != nil {
		return nil, err
	}
	items, err := collectItems(s, 0, len(lines), false)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.Err = ErrBadChecklist
		}
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: no \"- [ ] task\" line in %d lines", ErrNoChecklist, len(lines))
	}
	return items, nil
}

func errorAtNoBox(line int) error {
	return &ParseError{Line: line, Msg: "the Tasks section has no \"- [ ] task\" boxes", Err: ErrNoChecklist}
}

// isProgressFile reports whether the first non-blank line outside HTML
// comments is a "# Progress:" heading. (An unclosed fence is reported by
// the parser that runs next; the lines are classified all the same.)
func (s *source) isProgressFile() bool {
	for i, l := range s.lines {
		if l.kind == lineBlank || l.kind == lineComment {
			continue
		}
		lvl, text := heading(s.text(i))
		return l.kind == lineHeading && lvl == 1 && strings.HasPrefix(text, "Progress:")
	}
	return false
}
