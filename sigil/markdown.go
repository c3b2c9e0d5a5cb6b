package sigil

import "strings"

// span is a half-open byte range [start, end) of quoted text: a fenced code
// block (fence lines included) or an inline code span (backticks included).
type span struct{ start, end int }

// quotedSpans returns the quoted ranges of text in increasing, non-overlapping
// order. It runs in time linear in len(text).
//
// It follows CommonMark where that matters for telling a quoted tag from a
// standalone one: fences of three or more backticks or tildes, closed by a
// fence of the same character at least as long, an unclosed fence quoting the
// rest of the text; code spans opened by a backtick run and closed by the next
// run of exactly the same length within the same paragraph, a run with no
// such closer being literal; a backslash before a backtick run escapes its
// first backtick for opening. Simplifications are listed in the package doc.
func quotedSpans(text string) []span {
	var spans []span
	var open fence   // the open fence, when inFence
	inFence := false // inside a fenced code block
	fenceStart := 0  // start of the open fence's first line
	para := -1       // start of the current paragraph, -1 when none
	for pos := 0; pos < len(text); {
		end, next := lineEnd(text, pos)
		line := text[pos:end]
		switch {
		case inFence:
			if open.closedBy(line) {
				spans = append(spans, span{fenceStart, end})
				inFence = false
			}
		case isBlank(line):
			if para >= 0 {
				spans = inlineSpans(text, para, pos, spans)
				para = -1
			}
		default:
			if f, ok := openingFence(line); ok {
				if para >= 0 {
					spans = inlineSpans(text, para, pos, spans)
					para = -1
				}
				open, inFence, fenceStart = f, true, pos
			} else if para < 0 {
				para = pos
			}
		}
		pos = next
	}
	switch {
	case inFence:
		spans = append(spans, span{fenceStart, len(text)})
	case para >= 0:
		spans = inlineSpans(text, para, len(text), spans)
	}
	return spans
}

// lineEnd returns the end of the line starting at pos (the index of its '\n',
// or len(text)) and the start of the next line.
func lineEnd(text string, pos int) (end, next int) {
	i := strings.IndexByte(text[pos:], '\n')
	if i < 0 {
		return len(text), len(text)
	}
	return pos + i, pos + i + 1
}

// isBlank reports whether line holds only spaces, tabs and a carriage return.
func isBlank(line string) bool {
	for i := 0; i < len(line); i++ {
		if c := line[i]; c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// fence is an opening code fence: its character and its length.
type fence struct {
	char byte
	n    int
}

// openingFence reports whether line opens a fenced code block: optional
// indentation, block quote markers and one list item marker, then three or
// more backticks or tildes; a backtick fence's info string may not contain a
// backtick (such a line is inline code).
func openingFence(line string) (fence, bool) {
	line = skipListMarker(skipQuoteMarkers(line))
	if len(line) < 3 || (line[0] != '`' && line[0] != '~') {
		return fence{}, false
	}
	c := line[0]
	n := runLen(line, 0, c)
	if n < 3 || (c == '`' && strings.IndexByte(line[n:], '`') >= 0) {
		return fence{}, false
	}
	return fence{char: c, n: n}, true
}

// closedBy reports whether line closes f: optional indentation and block
// quote markers, a run of f's character at least as long as f, then only
// whitespace.
func (f fence) closedBy(line string) bool {
	line = skipQuoteMarkers(line)
	n := runLen(line, 0, f.char)
	return n >= f.n && isBlank(line[n:])
}

// skipQuoteMarkers strips leading whitespace and block quote markers ('>')
// from line.
func skipQuoteMarkers(line string) string {
	for {
		line = trimIndent(line)
		if !strings.HasPrefix(line, ">") {
			return line
		}
		line = line[1:]
	}
}

// skipListMarker strips one list item marker ("- ", "* ", "+ ", "1. ",
// "1) ") and the whitespace after it from line, if line starts with one.
func skipListMarker(line string) string {
	i := 0
	switch {
	case line != "" && strings.IndexByte("-*+", line[0]) >= 0:
		i = 1
	default:
		for i < len(line) && i < 9 && '0' <= line[i] && line[i] <= '9' {
			i++
		}
		if i == 0 || i == len(line) || (line[i] != '.' && line[i] != ')') {
			return line
		}
		i++
	}
	if i == len(line) || (line[i] != ' ' && line[i] != '\t') {
		return line
	}
	return trimIndent(line[i:])
}

// trimIndent strips leading spaces and tabs from line. (strings.TrimLeft
// builds a character set on every call, which showed in profiles: every
// line of a text goes through here.)
func trimIndent(line string) string {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return line[i:]
}

// runLen returns how many bytes equal to c start at s[i].
func runLen(s string, i int, c byte) int {
	j := i
	for j < len(s) && s[j] == c {
		j++
	}
	return j - i
}

// inlineSpans appends the code spans of the paragraph text[a:b] to spans.
//
// Finding the closer of every opener by scanning ahead would be quadratic on
// text with many unmatched runs of different lengths. As cmark does, the
// first scan that reaches the end of the paragraph without a closer records
// where the last run of every length is; later openers are then answered from
// that table, and a scan happens only when it is known to succeed (and its
// range is consumed). Each byte is so scanned a bounded number of times.
func inlineSpans(text string, a, b int, spans []span) []span {
	var last lastRuns  // start+1 of the last run seen, by length
	exhausted := false // a scan has reached b: last is complete from there on
	for p := a; p < b; {
		i := strings.IndexByte(text[p:b], '`')
		if i < 0 {
			break
		}
		i += p
		j := i + runLen(text[:b], i, '`')
		start, n := i, j-i
		if escaped(text, a, i) {
			start, n = i+1, n-1 // the first backtick is a literal
		}
		p = j
		if n == 0 || (exhausted && last.get(n) <= j) {
			// Literal backticks: the last run of length n starts before j.
			continue
		}
		for q := j; ; {
			k := strings.IndexByte(text[q:b], '`')
			if k < 0 {
				exhausted = true
				break
			}
			k += q
			m := runLen(text[:b], k, '`')
			last.set(m, k+1)
			q = k + m
			if m == n {
				spans = append(spans, span{start, q})
				p = q
				break
			}
		}
	}
	return spans
}

// escaped reports whether the backtick at text[i] is preceded by an odd
// number of backslashes within text[a:i].
func escaped(text string, a, i int) bool {
	n := 0
	for k := i - 1; k >= a && text[k] == '\\'; k-- {
		n++
	}
	return n%2 == 1
}

// lastRuns maps a backtick run length to the start+1 of the last run of that
// length seen (0: none). Short runs, the common case, avoid the map.
type lastRuns struct {
	short [16]int
	long  map[int]int
}

func (l *lastRuns) get(n int) int {
	if n < len(l.short) {
		return l.short[n]
	}
	return l.long[n]
}

func (l *lastRuns) set(n, pos int) {
	if n < len(l.short) {
		l.short[n] = max(l.short[n], pos)
		return
	}
	if l.long == nil {
		l.long = make(map[int]int)
	}
	l.long[n] = max(l.long[n], pos)
}
