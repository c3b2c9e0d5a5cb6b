package agentproc

import "unicode/utf8"

// ToolOutputLimit is the most bytes of a tool's output a runner keeps in
// an EventToolResult's Text; the raw log keeps all of it.
const ToolOutputLimit = 8 << 10

// MalformedExcerpt is the most bytes of a malformed stream line quoted in
// its EventMalformed.
const MalformedExcerpt = 200

// Cut shortens s to at most n bytes, on a rune boundary, and marks the cut
// with "…" (which the n bytes do not count).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Malformed is the excerpt of a malformed stream line that its
// EventMalformed quotes: Cut to MalformedExcerpt bytes.
func Malformed(raw []byte) string { return Cut(string(raw), MalformedExcerpt) }
