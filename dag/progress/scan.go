package progress

import (
	"regexp"
	"strings"
)

// This file reads the block structure of a markdown document the way
// CommonMark 0.31 (and so GitHub) does, as far as ralph needs it: which
// lines are code, HTML, headings, or the first line of a task list item.
// It follows the reference implementation's line-by-line algorithm
// (commonmark.js, blocks.js): open containers (block quotes, list items)
// are matched against each line, then new blocks are started, then the
// rest of the line is paragraph text, possibly a lazy continuation. Inline
// markup is not parsed: it never changes which lines are which. Link
// reference definitions are not recognised either: a box needs a space
// after "]", which a definition's label never has, so they never change
// which lines are boxes (only, in one corner, whether a paragraph of
// definitions over "===" is a heading).

// lineKind is what a line is in the block structure.
type lineKind uint8

const (
	lineText    lineKind = iota // paragraph text, list items that are not boxes, block quotes, rules, table rows
	lineBlank                   // empty or white space only (outside code)
	lineBox                     // the first line of a task list item, "- [ ] …", outside block quotes
	lineHeading                 // a top-level heading: an ATX line, or the first line of a setext heading
	lineSetext                  // a further line of a top-level setext heading, or its underline
	lineCode                    // in an indented or fenced code block (fences included)
	lineHTML                    // in an HTML block
	lineComment                 // in an HTML block that is a comment ("<!--" … "-->")
)

// line is one line of the source, as scan classifies it.
type line struct {
	start int   // byte offset of the line's first byte
	box   int32 // lineBox: offset in the line's text of the character between the brackets
	kind  lineKind
	level uint8 // lineHeading: 1–6
}

// inert reports whether the line is code or HTML: nothing in it counts.
func (l line) inert() bool { return l.kind >= lineCode }

// source is a document and its classified lines.
type source struct {
	src   string
	lines []line
}

// next is the offset of the line after line i (len(src) for the last).
func (s *source) next(i int) int {
	if i+1 < len(s.lines) {
		return s.lines[i+1].start
	}
	return len(s.src)
}

// end is the offset just past line i's text, before its line ending.
func (s *source) end(i int) int {
	e := s.next(i)
	if e > s.lines[i].start && s.src[e-1] == '\n' {
		e--
		if e > s.lines[i].start && s.src[e-1] == '\r' {
			e--
		}
	}
	return e
}

// textStart is the offset of line i's text: its start, past a byte order
// mark on the first line.
func (s *source) textStart(i int) int {
	if i == 0 && strings.HasPrefix(s.src, bom) {
		return len(bom)
	}
	return s.lines[i].start
}

// text is line i without its line ending (and without a byte order mark).
func (s *source) text(i int) string { return s.src[s.textStart(i):s.end(i)] }

// headingText is the text of the heading starting on line i: an ATX
// heading's text, or the lines of a setext heading joined by spaces.
func (s *source) headingText(i int) string {
	if lvl, text := heading(s.text(i)); lvl > 0 {
		return text
	}
	text := strings.TrimSpace(s.text(i))
	// The lines up to the underline, which is the last lineSetext line.
	for j := i + 1; j+1 < len(s.lines) && s.lines[j].kind == lineSetext && s.lines[j+1].kind == lineSetext; j++ {
		text += " " + strings.TrimSpace(s.text(j))
	}
	return text
}

const bom = "\ufeff"

// container is an open block quote or list item.
type container struct {
	quote bool
	width int  // list item: the columns a line must be indented by to continue it
	empty bool // list item: nothing in it yet (it began with a blank line)
}

// leafKind is the kind of the open leaf block.
type leafKind uint8

const (
	leafNone leafKind = iota
	leafParagraph
	leafFence
	leafIndented
	leafHTML
)

// scanner holds the state of scan between lines.
type scanner struct {
	source
	stack  []container // the open containers, outermost first
	quotes int         // how many of them are block quotes
	// stops holds, in order, the indices in stack of the containers a
	// blank line does not continue: block quotes and empty list items. A
	// blank line continues every container before the first of them, so
	// it is matched without walking a stack that may be thousands deep.
	stops []int

	leaf      leafKind
	leafDepth int // len(stack) when the leaf was opened
	leafLine  int // the line it was opened on
	// paragraph
	paraTable bool // a GFM table: its lines never become a setext heading
	// fence
	fenceChar  byte
	fenceLen   int
	fenceShown string // the opening run, for errors
	// HTML block
	htmlType int
	htmlOpen string // how it opened, for errors
}

// scan splits src into lines and classifies them. A fenced code block or
// an HTML block that ends only at the end of the document (a fence or
// "<!--" never closed) is an error: it would silently hide every box after
// it. The lines are returned even then.
func scan(src string) ([]line, error) {
	s := &scanner{source: source{src: src, lines: make([]line, 0, strings.Count(src, "\n")+1)}}
	for start := 0; start < len(src); {
		end, next := len(src), len(src)
		if i := strings.IndexByte(src[start:], '\n'); i >= 0 {
			end, next = start+i, start+i+1
		}
		if end > start && src[end-1] == '\r' {
			end--
		}
		text := src[start:end]
		if start == 0 {
			text = strings.TrimPrefix(text, bom)
		}
		s.lines = append(s.lines, line{start: start})
		s.line(len(s.lines)-1, text)
		start = next
	}
	switch s.leaf {
	case leafFence:
		return s.lines, errorAt(s.leafLine+1, "code fence %q is never closed", s.fenceShown)
	case leafHTML:
		if s.htmlType <= 5 {
			if s.htmlType == 2 {
				return s.lines, errorAt(s.leafLine+1, "HTML comment %q is never closed (no %q)", s.htmlOpen, htmlEnds[2])
			}
			return s.lines, errorAt(s.leafLine+1, "HTML block %q is never closed (no %q)", s.htmlOpen, htmlEnd(s.htmlType, s.htmlOpen))
		}
	}
	return s.lines, nil
}

// cursor walks a line's text by bytes and columns (a tab advances to the
// next multiple of 4), as CommonMark counts indentation.
type cursor struct {
	s       string
	pos     int  // byte offset
	col     int  // column of pos
	partial bool // pos is a tab of which some columns were consumed

	// set by findNext
	next    int // offset of the next character that is not a space or tab
	nextCol int
	indent  int // columns from pos to next
	blank   bool
	found   bool // next and nextCol were found once on this line
}

// findNext finds the next character that is not a space or tab. While pos
// has not passed the one found last, that one is still next, and its
// column too (tab stops are absolute): only the indentation from pos is
// worked out again. Matching a line against many open list items asks
// for it once per item, so reading the whitespace again each time would
// cost the square of the line's indentation.
func (c *cursor) findNext() {
	if c.found && c.pos <= c.next {
		c.indent = c.nextCol - c.col
		c.blank = c.next == len(c.s)
		return
	}
	c.found = true
	i, cols := c.pos, c.col
loop:
	for i < len(c.s) {
		switch c.s[i] {
		case ' ':
			cols++
		case '\t':
			cols += 4 - cols%4
		default:
			break loop
		}
		i++
	}
	c.next, c.nextCol = i, cols
	c.indent = cols - c.col
	c.blank = i == len(c.s)
}

func (c *cursor) indented() bool { return c.indent >= 4 }

// peek is the byte at pos, or 0 at the end.
func (c *cursor) peek() byte {
	if c.pos < len(c.s) {
		return c.s[c.pos]
	}
	return 0
}

// rest is the text from the next non-space character on.
func (c *cursor) rest() string { return c.s[c.next:] }

func (c *cursor) toNext() {
	c.pos, c.col, c.partial = c.next, c.nextCol, false
}

// advance moves count columns (columns true) or characters forward; a tab
// counted by columns may be consumed in part.
func (c *cursor) advance(count int, columns bool) {
	for count > 0 && c.pos < len(c.s) {
		if c.s[c.pos] != '\t' {
			c.partial = false
			c.pos++
			c.col++
			count--
			continue
		}
		toTab := 4 - c.col%4
		if !columns {
			c.partial = false
			c.col += toTab
			c.pos++
			count--
			continue
		}
		c.partial = toTab > count
		step := min(toTab, count)
		c.col += step
		if !c.partial {
			c.pos++
		}
		count -= step
	}
}

func isSpaceOrTab(b byte) bool { return b == ' ' || b == '\t' }

// close closes the containers past the first matched ones, and the leaf
// block if it was inside them.
func (s *scanner) close(matched int) {
	for _, c := range s.stack[matched:] {
		if c.quote {
			s.quotes--
		}
	}
	s.stack = s.stack[:matched]
	for len(s.stops) > 0 && s.stops[len(s.stops)-1] >= matched {
		s.stops = s.stops[:len(s.stops)-1]
	}
	if s.leaf != leafNone && s.leafDepth > matched {
		s.leaf = leafNone
	}
}

// add starts a new block in the innermost container, closing the open
// leaf (nothing can be added to a leaf).
func (s *scanner) add(i int, leaf leafKind) {
	if n := len(s.stack); n > 0 && s.stack[n-1].empty {
		s.stack[n-1].empty = false
		s.stops = s.stops[:len(s.stops)-1] // it was the last stop
	}
	s.leaf, s.leafDepth, s.leafLine = leaf, len(s.stack), i
	s.paraTable = false
}

// push opens a container inside the innermost one.
func (s *scanner) push(ct container) {
	if ct.quote || ct.empty {
		s.stops = append(s.stops, len(s.stack))
	}
	if ct.quote {
		s.quotes++
	}
	s.stack = append(s.stack, ct)
}

// line classifies line i, given the state after the lines before it.
func (s *scanner) line(i int, text string) {
	l := &s.lines[i]
	c := cursor{s: text}
	breaks := breakTails{s: text}

	// 1. Match the open containers. A blank line continues all of them
	// up to the first stop (the loop below, in one step).
	matched := 0
	if c.findNext(); c.blank && len(s.stack) > 0 {
		matched = len(s.stack)
		if len(s.stops) > 0 {
			matched = s.stops[0]
		}
		if matched > 0 {
			c.toNext()
		}
	}
	for ; matched < len(s.stack); matched++ {
		ct := &s.stack[matched]
		c.findNext()
		if ct.quote {
			if c.indented() || c.next == len(c.s) || c.s[c.next] != '>' {
				break
			}
			c.toNext()
			c.advance(1, false)
			if isSpaceOrTab(c.peek()) {
				c.advance(1, true)
			}
			continue
		}
		if c.blank {
			if ct.empty {
				break // a list item can begin with one blank line, not two
			}
			c.toNext()
		} else if c.indent >= ct.width {
			c.advance(ct.width, true)
		} else {
			break
		}
	}
	all := matched == len(s.stack)
	c.findNext()

	// 2. The open leaf block, if every container matched.
	paraMatched := false
	if all {
		switch s.leaf {
		case leafFence:
			l.kind = lineCode
			if !c.indented() && closesFence(c.rest(), s.fenceChar, s.fenceLen) {
				s.leaf = leafNone
			}
			return
		case leafIndented:
			if c.indented() {
				l.kind = lineCode
				return
			}
			if c.blank {
				l.kind = lineBlank // blank lines inside code, or ending it
				return
			}
			s.leaf = leafNone
		case leafHTML:
			if c.blank && s.htmlType >= 6 {
				s.leaf = leafNone // the blank line ends it and is not part of it
				break
			}
			s.htmlLine(l, c.s[c.pos:])
			return
		case leafParagraph:
			paraMatched = !c.blank
		}
	}
	tipIsPara := s.leaf == leafParagraph // maybe a lazy continuation

	// 3. New blocks.
	opened := false
	for {
		c.findNext()
		if !c.indented() && (c.blank || !strings.ContainsRune("#`~*+_=<>-0123456789", rune(c.s[c.next]))) {
			break
		}
		rest := c.rest()
		switch {
		case !c.indented() && rest[0] == '>':
			c.toNext()
			c.advance(1, false)
			if isSpaceOrTab(c.peek()) {
				c.advance(1, true)
			}
			s.close(matched)
			s.add(i, leafNone)
			s.push(container{quote: true})
			matched, opened, paraMatched, tipIsPara = len(s.stack), true, false, false
			continue

		case !c.indented() && atxHeading(rest):
			s.close(matched)
			s.add(i, leafNone)
			if len(s.stack) == 0 {
				lvl, _ := heading(rest)
				l.kind, l.level = lineHeading, uint8(lvl)
			} else {
				l.kind = lineText
			}
			return

		case !c.indented() && opensFence(rest) > 0:
			n := opensFence(rest)
			s.close(matched)
			s.add(i, leafFence)
			s.fenceChar, s.fenceLen, s.fenceShown = rest[0], n, rest[:n]
			l.kind = lineCode
			return

		case !c.indented() && rest[0] == '<' && htmlStart(rest, paraMatched || tipIsPara) > 0:
			typ := htmlStart(rest, paraMatched || tipIsPara)
			s.close(matched)
			s.add(i, leafHTML)
			s.htmlType = typ
			s.htmlOpen = rest[:min(len(rest), htmlOpenLen(rest, typ))]
			s.htmlLine(l, c.s[c.pos:])
			return

		case !c.indented() && paraMatched && !s.paraTable && setextUnderline(rest) > 0:
			if s.leafDepth == 0 {
				p := s.leafLine
				s.lines[p].kind, s.lines[p].level = lineHeading, uint8(setextUnderline(rest))
				for j := p + 1; j <= i; j++ {
					s.lines[j].kind = lineSetext
				}
			} else {
				l.kind = lineText
			}
			s.leaf = leafNone
			return

		case !c.indented() && breaks.at(c.next):
			s.close(matched)
			s.add(i, leafNone)
			l.kind = lineText
			return
		}

		if w, empty, ok := s.listItem(&c, paraMatched); ok {
			s.close(matched)
			s.add(i, leafNone)
			s.push(container{width: w, empty: empty})
			if s.quotes == 0 && !c.partial && l.kind != lineBox {
				if off, ok := boxAt(c.s, c.pos); ok && off <= 1<<31-1 {
					l.kind, l.box = lineBox, int32(off)
				}
			}
			matched, opened, paraMatched, tipIsPara = len(s.stack), true, false, false
			continue
		}

		if c.indented() && !tipIsPara && !c.blank {
			s.close(matched)
			s.add(i, leafIndented)
			l.kind = lineCode
			return
		}
		break
	}

	// 4. The rest of the line is text: a lazy continuation of an open
	// paragraph, its continuation, or a new paragraph.
	c.findNext()
	if !opened && !all && !c.blank && s.leaf == leafParagraph {
		l.kind = lineText // lazy: the unmatched containers stay open
		return
	}
	if !paraMatched {
		s.close(matched)
	}
	if l.kind == lineBox {
		s.add(i, leafParagraph)
		return
	}
	switch {
	case c.blank:
		if s.leaf == leafParagraph {
			s.leaf = leafNone
		}
		l.kind = lineBlank
	case paraMatched:
		l.kind = lineText
		if s.leafDepth == 0 && !s.paraTable && tableDelimiter(c.rest(), s.text(i-1)) {
			s.paraTable = true
		}
	default:
		s.add(i, leafParagraph)
		l.kind = lineText
	}
}

// htmlLine classifies a line of the open HTML block and closes the block
// when the line holds its end.
func (s *scanner) htmlLine(l *line, text string) {
	l.kind = lineHTML
	if s.htmlType == 2 {
		l.kind = lineComment
	}
	if s.htmlType == 1 {
		text = strings.ToLower(text)
	}
	if s.htmlType <= 5 && strings.Contains(text, htmlEnd(s.htmlType, s.htmlOpen)) {
		s.leaf = leafNone
	}
}

// listItem parses a list marker at the cursor (CommonMark's
// parseListMarker). On success the cursor is at the item's content and w
// is the item's width: the columns a line needs to continue it; empty is
// true when the item has nothing on this line. An item interrupting a
// paragraph must not be empty, and an ordered one must start at 1.
func (s *scanner) listItem(c *cursor, interrupting bool) (w int, empty, ok bool) {
	if c.indented() || c.blank {
		return 0, false, false
	}
	rest := c.rest()
	n := 0
	switch rest[0] {
	case '-', '+', '*':
		n = 1
	default:
		for n < len(rest) && n < 10 && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 0 || n > 9 || n >= len(rest) || (rest[n] != '.' && rest[n] != ')') {
			return 0, false, false
		}
		if interrupting && strings.TrimLeft(rest[:n], "0") != "1" {
			return 0, false, false
		}
		n++
	}
	if n < len(rest) && !isSpaceOrTab(rest[n]) {
		return 0, false, false
	}
	empty = strings.TrimLeft(rest[n:], " \t") == ""
	if interrupting && empty {
		return 0, false, false
	}
	markerOffset := c.indent
	c.toNext()
	c.advance(n, true)
	spacesCol, spacesPos, spacesPartial := c.col, c.pos, c.partial
	for {
		c.advance(1, true)
		if c.col-spacesCol >= 5 || !isSpaceOrTab(c.peek()) {
			break
		}
	}
	spaces := c.col - spacesCol
	if spaces >= 5 || spaces < 1 || c.pos >= len(c.s) {
		// Content indented 5 or more is code one column after the
		// marker; an empty item's content starts there too.
		c.col, c.pos, c.partial = spacesCol, spacesPos, spacesPartial
		if isSpaceOrTab(c.peek()) {
			c.advance(1, true)
		}
		return markerOffset + n + 1, empty, true
	}
	return markerOffset + n + spaces, empty, true
}

// boxAt reports whether text at pos starts with a task list marker, "[ ]",
// "[x]" or "[X]" followed by a space, a tab or the end of the line, and
// returns the offset of the character between the brackets.
func boxAt(text string, pos int) (int, bool) {
	t := text[pos:]
	if len(t) < 3 || t[0] != '[' || t[2] != ']' || (t[1] != ' ' && t[1] != 'x' && t[1] != 'X') {
		return 0, false
	}
	if len(t) > 3 && !isSpaceOrTab(t[3]) {
		return 0, false
	}
	return pos + 1, true
}

// atxHeading reports whether s (at no indentation) opens an ATX heading.
func atxHeading(s string) bool {
	n := len(s) - len(strings.TrimLeft(s, "#"))
	return n >= 1 && n <= 6 && (n == len(s) || isSpaceOrTab(s[n]))
}

// opensFence returns the length of the code fence s opens, or 0: three or
// more backticks (with no backtick after them) or tildes.
func opensFence(s string) int {
	if s[0] != '`' && s[0] != '~' {
		return 0
	}
	n := len(s) - len(strings.TrimLeft(s, s[:1]))
	if n < 3 || (s[0] == '`' && strings.IndexByte(s[n:], '`') >= 0) {
		return 0
	}
	return n
}

// closesFence reports whether s (at no indentation) closes a fence of n
// characters ch: n or more of them, then only spaces and tabs.
func closesFence(s string, ch byte, n int) bool {
	k := 0
	for k < len(s) && s[k] == ch {
		k++
	}
	return k >= n && strings.Trim(s[k:], " \t") == ""
}

// breakTails answers thematicBreak for the rest of one line from any
// offset, in time linear in the line however often it is asked: a line of
// list markers ("- - - … [ ] x") asks at each marker, and reading the rest
// of the line each time would cost the square of its length.
type breakTails struct {
	s     string
	tail  [3]int  // per "*", "-", "_": where the run of it, spaces and tabs that ends the line begins
	known [3]bool // tail was worked out
}

// at reports whether s[p:] is a thematic break.
func (b *breakTails) at(p int) bool {
	k := strings.IndexByte("*-_", b.s[p])
	if k < 0 {
		return false
	}
	if !b.known[k] {
		t := len(b.s)
		for t > 0 && (b.s[t-1] == b.s[p] || isSpaceOrTab(b.s[t-1])) {
			t--
		}
		b.tail[k], b.known[k] = t, true
	}
	// Past the tail the rest is that character, spaces and tabs only:
	// when it is a break, reading it ends the line's blocks; when it is
	// not, it holds fewer than three of the character, so at most two
	// more markers ask.
	return p >= b.tail[k] && thematicBreak(b.s[p:])
}

// thematicBreak reports whether s is a thematic break: three or more "*",
// "-" or "_", the same, with spaces and tabs between.
func thematicBreak(s string) bool {
	ch := s[0]
	if ch != '*' && ch != '-' && ch != '_' {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ch:
			n++
		case ' ', '\t':
		default:
			return false
		}
	}
	return n >= 3
}

// setextUnderline returns 1 for a line of "=", 2 for a line of "-" (each
// followed only by spaces and tabs), 0 otherwise.
func setextUnderline(s string) int {
	ch := s[0]
	if ch != '=' && ch != '-' {
		return 0
	}
	k := len(s) - len(strings.TrimLeft(s, s[:1]))
	if strings.Trim(s[k:], " \t") != "" {
		return 0
	}
	if ch == '=' {
		return 1
	}
	return 2
}

// tableDelimiter reports whether s is the delimiter row of a GFM table
// whose header row is header: cells of "-" with optional ":" at either
// end, at least one "|", and as many cells as the header.
func tableDelimiter(s, header string) bool {
	if !strings.Contains(s, "|") || strings.Trim(s, "|:- \t") != "" {
		return false
	}
	cells := tableCells(s)
	for _, c := range cells {
		if strings.Trim(strings.TrimSpace(c), ":") == "" || strings.Trim(strings.TrimSpace(c), "-:") != "" {
			return false
		}
	}
	return len(cells) == len(tableCells(header))
}

// tableCells splits a table row at the pipes that are not escaped, without
// the outer ones.
func tableCells(s string) []string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "|")
	if strings.HasSuffix(s, "|") && !strings.HasSuffix(s, `\|`) {
		s = s[:len(s)-1]
	}
	var cells []string
	from := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '|':
			cells = append(cells, s[from:i])
			from = i + 1
		}
	}
	return append(cells, s[from:])
}

// htmlBlockTags are the tag names that start an HTML block of type 6.
var htmlBlockTags = map[string]bool{}

func init() {
	for _, t := range strings.Fields(`address article aside base basefont blockquote body caption center col
		colgroup dd details dialog dir div dl dt fieldset figcaption figure footer form frame frameset
		h1 h2 h3 h4 h5 h6 head header hr html iframe legend li link main menu menuitem nav noframes ol
		optgroup option p param search section summary table tbody td tfoot th thead title tr track ul`) {
		htmlBlockTags[t] = true
	}
}

// htmlTag7 matches a complete open or closing tag alone on its line, the
// start of an HTML block of type 7.
var htmlTag7 = regexp.MustCompile(`^(?:<[A-Za-z][A-Za-z0-9-]*` +
	`(?:\s+[A-Za-z_:][A-Za-z0-9_.:-]*(?:\s*=\s*(?:[^"'=<>` + "`" + `\x00-\x20]+|'[^']*'|"[^"]*"))?)*\s*/?>` +
	`|</[A-Za-z][A-Za-z0-9-]*\s*>)\s*$`)

// htmlEnds are the end markers of HTML blocks of types 2 to 5.
var htmlEnds = [...]string{2: "-->", 3: "?>", 4: ">", 5: "]]>"}

// htmlEnd is what ends an HTML block of type 1 to 5 (lowercase).
func htmlEnd(typ int, open string) string {
	if typ == 1 {
		return "</" + strings.ToLower(strings.TrimLeft(open, "<")) + ">"
	}
	return htmlEnds[typ]
}

// htmlOpenLen is how much of s names how an HTML block opened, for errors.
func htmlOpenLen(s string, typ int) int {
	switch typ {
	case 1:
		return 1 + len(s[1:]) - len(strings.TrimLeft(s[1:], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
	case 2:
		return 4
	case 3:
		return 2
	case 5:
		return 9
	}
	return len(s)
}

// htmlStart returns the type (1–7) of the HTML block s starts, or 0. Type 7
// cannot interrupt a paragraph.
func htmlStart(s string, inParagraph bool) int {
	if len(s) < 2 || s[0] != '<' {
		return 0
	}
	lower := strings.ToLower(s[:min(len(s), 12)]) // "<textarea" and one more
	for _, t := range []string{"pre", "script", "style", "textarea"} {
		if rest, ok := strings.CutPrefix(lower, "<"+t); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '>') {
			return 1
		}
	}
	switch {
	case strings.HasPrefix(s, "<!--"):
		return 2
	case strings.HasPrefix(s, "<?"):
		return 3
	case strings.HasPrefix(s, "<![CDATA["):
		return 5
	case len(s) > 2 && s[1] == '!' && isASCIILetter(s[2]):
		return 4
	}
	name := strings.TrimPrefix(s[1:], "/")
	k := 0
	for k < len(name) && (isASCIILetter(name[k]) || (k > 0 && name[k] >= '0' && name[k] <= '9')) {
		k++
	}
	if k > 0 && htmlBlockTags[strings.ToLower(name[:k])] {
		after := name[k:]
		if after == "" || after[0] == ' ' || after[0] == '\t' || after[0] == '>' || strings.HasPrefix(after, "/>") {
			return 6
		}
	}
	if !inParagraph && htmlTag7.MatchString(s) {
		return 7
	}
	return 0
}

func isASCIILetter(b byte) bool { return (b|0x20) >= 'a' && (b|0x20) <= 'z' }
