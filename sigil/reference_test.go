package sigil

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// This file holds a slow, obviously-quadratic reference of quotedSpans and
// Parse: no cursors, no closer caches, no run tables. FuzzParse and
// TestReference check that the fast code agrees with it.

// refQuoted marks every quoted byte of text.
func refQuoted(text string) []bool {
	q := make([]bool, len(text))
	var lines []span
	for pos := 0; pos < len(text); {
		end, next := lineEnd(text, pos)
		lines = append(lines, span{pos, end})
		pos = next
	}
	mark := func(a, b int) {
		for i := a; i < b; i++ {
			q[i] = true
		}
	}
	para := -1
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		line := text[l.start:l.end]
		f, isFence := openingFence(line)
		if isBlank(line) || isFence {
			if para >= 0 {
				refInline(text, para, l.start, mark)
				para = -1
			}
		}
		switch {
		case isFence:
			end := len(text)
			for j := i + 1; j < len(lines); j++ {
				if f.closedBy(text[lines[j].start:lines[j].end]) {
					end, i = lines[j].end, j
					break
				}
			}
			mark(l.start, end)
			if end == len(text) {
				i = len(lines)
			}
		case isBlank(line):
		case para < 0:
			para = l.start
		}
	}
	if para >= 0 {
		refInline(text, para, len(text), mark)
	}
	return q
}

// refInline marks the code spans of text[a:b], looking for every opener's
// closer by scanning ahead.
func refInline(text string, a, b int, mark func(a, b int)) {
	for p := a; p < b; {
		if text[p] != '`' {
			p++
			continue
		}
		j := p + runLen(text[:b], p, '`')
		start, n := p, j-p
		if escaped(text, a, p) {
			start, n = p+1, n-1
		}
		p = j
		for q := j; n > 0 && q < b; {
			if text[q] != '`' {
				q++
				continue
			}
			m := runLen(text[:b], q, '`')
			if m == n {
				mark(start, q+m)
				p = q + m
				break
			}
			q += m
		}
	}
}

// refParse is Parse over refQuoted, searching every closer afresh.
func refParse(text string) Result {
	var r Result
	quoted := refQuoted(text)
	var done, failed set
	sawPass := false
	p := parser{}
	for at := 0; at < len(text); at++ {
		if text[at] != '<' || quoted[at] {
			continue
		}
		k, body, self, ok := openTag(text, at)
		if !ok {
			continue
		}
		v, end := "", body
		if !self {
			found := false
			for c := body; c < len(text); c++ {
				if text[c] != '<' {
					continue
				}
				e, ok := closeTag(text, c, k)
				if ok && !quoted[c] {
					v, end, found = strings.TrimSpace(text[body:c]), e, true
					break
				}
				if k != kindVerifyFail {
					break // a short body ends at its first '<'
				}
			}
			if !found {
				continue
			}
		}
		p.done, p.failed, p.sawPass = done, failed, sawPass
		p.emit(&r, k, v)
		done, failed, sawPass = p.done, p.failed, p.sawPass
		at = end - 1
	}
	r.Done = done.list
	for _, id := range failed.list {
		if !done.has(id) {
			r.Failed = append(r.Failed, id)
		}
	}
	r.VerifyPass = sawPass && !r.VerifyFail
	return r
}

// checkReference fails t when the fast code and the reference disagree.
func checkReference(t *testing.T, text string) {
	t.Helper()
	want := refQuoted(text)
	got := make([]bool, len(text))
	for _, s := range quotedSpans(text) {
		for i := s.start; i < s.end; i++ {
			got[i] = true
		}
	}
	// slices.Equal first: cmp.Diff on long []bool is slow, and the fuzzers
	// call this for every input.
	if !slices.Equal(want, got) {
		i := 0
		for want[i] == got[i] {
			i++
		}
		t.Fatalf("quotedSpans(%q): byte %d quoted=%v, reference says %v", text, i, got[i], want[i])
	}
	if diff := cmp.Diff(refParse(text), Parse(text)); diff != "" {
		t.Fatalf("Parse(%q) differs from the reference (-ref +fast):\n%s", text, diff)
	}
}

func TestReference(t *testing.T) {
	tests := []struct {
		name string
		text string
	}{
		{name: "benchmark text", text: realisticText(64 << 10)},
		{name: "backtick runs", text: adversarialRuns(8 << 10)},
		{name: "unclosed verify-fail then closed", text: "<verify-fail>a <verify-fail>b</verify-fail> <verify-fail>c"},
		{name: "quoted closers", text: "<verify-fail>" + strings.Repeat("`</verify-fail>` ", 50) + "</verify-fail>"},
		{name: "escapes", text: "\\`a` \\\\`b` \\``c` `` d ` e ``"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkReference(t, tt.text)
		})
	}
}
