package sigil

import (
	"slices"
	"strings"
)

// Result is every sigil found in a text.
type Result struct {
	Done         []string // ids of <task-done>ID</task-done>, first-seen order, deduplicated, trimmed
	Failed       []string // ids of <task-failed>ID</task-failed>, minus any id also in Done (done wins)
	Complete     bool     // <promise>COMPLETE</promise>
	Failure      bool     // <promise>FAILURE</promise>
	NextModel    string   // last valid <next-model>opus|sonnet|haiku</next-model>; other values ignored; "" if none
	VerifyPass   bool     // <verify-pass/>, and no <verify-fail> anywhere (fail wins)
	VerifyFail   bool     // <verify-fail>reason</verify-fail>
	VerifyReason string   // the (trimmed) reason of the last verify-fail
}

// TaskDone reports whether id is in r.Done.
func (r Result) TaskDone(id string) bool { return slices.Contains(r.Done, id) }

// TaskFailed reports whether id is in r.Failed; it is false for an id that
// was also reported done.
func (r Result) TaskFailed(id string) bool { return slices.Contains(r.Failed, id) }

// Empty reports whether the text held no sigil at all.
func (r Result) Empty() bool {
	return len(r.Done) == 0 && len(r.Failed) == 0 && !r.Complete && !r.Failure &&
		r.NextModel == "" && !r.VerifyPass && !r.VerifyFail
}

// The valid <next-model> values.
const (
	ModelOpus   = "opus"
	ModelSonnet = "sonnet"
	ModelHaiku  = "haiku"
)

// Models lists the valid <next-model> values, strongest first. The slice is
// the caller's to keep.
func Models() []string { return []string{ModelOpus, ModelSonnet, ModelHaiku} }

// The <promise> values.
const (
	PromiseComplete = "COMPLETE"
	PromiseFailure  = "FAILURE"
)

// kind is one sigil tag.
type kind int

const (
	kindTaskDone kind = iota
	kindTaskFailed
	kindPromise
	kindNextModel
	kindVerifyPass
	kindVerifyFail
)

// tagNames holds each kind's tag name. No name is a prefix of another.
var tagNames = [...]string{
	kindTaskDone:   "task-done",
	kindTaskFailed: "task-failed",
	kindPromise:    "promise",
	kindNextModel:  "next-model",
	kindVerifyPass: "verify-pass",
	kindVerifyFail: "verify-fail",
}

// isTagStart holds the first bytes of the tag names.
var isTagStart = [256]bool{'t': true, 'p': true, 'n': true, 'v': true}

// Parse returns every standalone sigil in text (see the package doc for the
// rules). It never fails: text that holds no sigil gives a Result for which
// Empty is true. Parse runs in time linear in len(text) and is safe for
// concurrent use.
func Parse(text string) Result {
	var r Result
	if strings.IndexByte(text, '<') < 0 {
		return r // no tag at all; skip the markdown pass
	}
	p := parser{text: text, code: quotedSpans(text)}
	p.run(&r)
	return r
}

// parser holds the state of one Parse call.
type parser struct {
	text string
	code []span // quoted ranges, in order
	cur  int    // index of the first code span that may contain or follow the scan position

	sawPass      bool
	noFailCloser bool // no standalone </verify-fail> follows some earlier <verify-fail>
	done, failed set
}

// run scans p.text for tags and fills r.
func (p *parser) run(r *Result) {
	text := p.text
	for pos := 0; pos < len(text); {
		i := strings.IndexByte(text[pos:], '<')
		if i < 0 {
			break
		}
		at := pos + i
		if end, quoted := p.quotedAt(&p.cur, at); quoted {
			pos = end
			continue
		}
		k, body, selfClosed, ok := openTag(text, at)
		if !ok {
			pos = at + 1
			continue
		}
		if selfClosed {
			p.emit(r, k, "")
			pos = body
			continue
		}
		if k == kindVerifyFail {
			pos = p.verifyFail(r, at, body)
			continue
		}
		// Every other body is a short value: it runs to the next '<', which
		// must be this tag's standalone closer.
		j := strings.IndexByte(text[body:], '<')
		if j < 0 {
			break // no '<' left, so no tag left either
		}
		closeAt := body + j
		end, ok := closeTag(text, closeAt, k)
		if _, quoted := p.quotedAt(&p.cur, closeAt); !ok || quoted {
			pos = closeAt // that '<' may open a tag of its own
			continue
		}
		p.emit(r, k, strings.TrimSpace(text[body:closeAt]))
		pos = end
	}
	r.Done = p.done.list
	for _, id := range p.failed.list {
		if !p.done.has(id) {
			r.Failed = append(r.Failed, id)
		}
	}
	r.VerifyPass = p.sawPass && !r.VerifyFail
}

// verifyFail handles a <verify-fail> opened at at, its body starting at body,
// and returns where scanning goes on. The reason is free text: it may hold
// '<', line breaks and code, and runs to the first standalone </verify-fail>.
// Tags inside a reason are part of it, not sigils.
func (p *parser) verifyFail(r *Result, at, body int) int {
	if p.noFailCloser {
		return at + 1 // an earlier search from before here found no closer
	}
	text := p.text
	cur := p.cur // a closer search must not move the main cursor past at
	for from := body; ; {
		j := strings.Index(text[from:], "</verify-fail")
		if j < 0 {
			p.noFailCloser = true
			return at + 1
		}
		closeAt := from + j
		end, ok := closeTag(text, closeAt, kindVerifyFail)
		if _, quoted := p.quotedAt(&cur, closeAt); ok && !quoted {
			p.cur = cur
			p.emit(r, kindVerifyFail, strings.TrimSpace(text[body:closeAt]))
			return end
		}
		from = closeAt + 1
	}
}

// quotedAt reports whether text[at] is quoted and, if so, where its quoted
// span ends. *cur is a cursor into p.code; at must not decrease between calls
// sharing a cursor.
func (p *parser) quotedAt(cur *int, at int) (end int, quoted bool) {
	for *cur < len(p.code) && p.code[*cur].end <= at {
		*cur++
	}
	if *cur < len(p.code) && p.code[*cur].start <= at {
		return p.code[*cur].end, true
	}
	return 0, false
}

// emit records one sigil of kind k whose trimmed body is v.
func (p *parser) emit(r *Result, k kind, v string) {
	switch k {
	case kindTaskDone:
		if validID(v) {
			p.done.add(v)
		}
	case kindTaskFailed:
		if validID(v) {
			p.failed.add(v)
		}
	case kindPromise:
		switch v {
		case PromiseComplete:
			r.Complete = true
		case PromiseFailure:
			r.Failure = true
		}
	case kindNextModel:
		if slices.Contains(Models(), v) {
			r.NextModel = v
		}
	case kindVerifyPass:
		if v == "" {
			p.sawPass = true
		}
	case kindVerifyFail:
		r.VerifyFail = true
		r.VerifyReason = v
	}
}

// validID reports whether a trimmed tag body is a task id: not empty, and
// free of control characters (line breaks, tabs, …) and '<'. Parse never
// gives a body holding '<'; the check keeps validID honest on its own.
func validID(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == 0x7f || c == '<' {
			return false
		}
	}
	return true
}

// openTag matches an opening sigil tag at text[at] == '<': the tag name,
// optional whitespace, then '>' or "/>". It returns the tag's kind, the
// offset just past the tag, and whether the tag closed itself.
func openTag(text string, at int) (k kind, end int, selfClosed, ok bool) {
	rest := text[at+1:]
	if rest == "" || !isTagStart[rest[0]] {
		return 0, 0, false, false // the common case: a '<' in code or prose
	}
	for k, name := range tagNames {
		if !strings.HasPrefix(rest, name) {
			continue
		}
		i := skipSpace(text, at+1+len(name))
		switch {
		case i < len(text) && text[i] == '>':
			return kind(k), i + 1, false, true
		case i+1 < len(text) && text[i] == '/' && text[i+1] == '>':
			return kind(k), i + 2, true, true
		}
		return 0, 0, false, false
	}
	return 0, 0, false, false
}

// closeTag matches the closing tag of k at text[at]: "</", the name,
// optional whitespace, '>'. It returns the offset just past it.
func closeTag(text string, at int, k kind) (end int, ok bool) {
	name := tagNames[k]
	if !strings.HasPrefix(text[at:], "</") || !strings.HasPrefix(text[at+2:], name) {
		return 0, false
	}
	i := skipSpace(text, at+2+len(name))
	if i < len(text) && text[i] == '>' {
		return i + 1, true
	}
	return 0, false
}

// skipSpace returns the offset of the first byte at or after i that is not
// ASCII whitespace.
func skipSpace(text string, i int) int {
	for i < len(text) {
		switch text[i] {
		case ' ', '\t', '\n', '\r', '\f', '\v':
			i++
		default:
			return i
		}
	}
	return i
}

// set is an insertion-ordered set of ids.
type set struct {
	list []string
	seen map[string]bool
}

func (s *set) add(id string) {
	if s.seen[id] {
		return
	}
	if s.seen == nil {
		s.seen = make(map[string]bool)
	}
	s.seen[id] = true
	s.list = append(s.list, id)
}

func (s *set) has(id string) bool { return s.seen[id] }

// RalphDone reports whether RALPH_DONE stands alone on a line (surrounding
// whitespace allowed) in text. As for tags, a line inside a fenced code block
// is quoted and does not count.
func RalphDone(text string) bool {
	var open fence
	inFence := false
	for pos := 0; pos < len(text); {
		end, next := lineEnd(text, pos)
		line := text[pos:end]
		switch {
		case inFence:
			inFence = !open.closedBy(line)
		case strings.TrimSpace(line) == "RALPH_DONE":
			return true
		default:
			open, inFence = openingFence(line)
		}
		pos = next
	}
	return false
}
