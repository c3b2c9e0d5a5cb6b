package main

import (
	"io"

	"github.com/ralph-dev/ralph/claude"
)

// Text is data (ARCHITECTURE.md §7): task titles and descriptions, an agent's
// words, the messages of errors (which quote ids, titles and the lines of
// import files) can carry escape sequences a terminal would obey — a
// screen clear, a cursor moved over earlier lines, an OSC 52 clipboard
// write. Every byte the commands print goes through an escaping writer
// (terminalWriter, set up in newAppConfig), which shows each control
// character but newline and tab as an escape (claude.EscapeControls:
// \x1b, \r, \u009b, …); the stored data keeps them. The two printers that
// write escape sequences of their own — the build view's colours
// (claude.Formatter) and the board of a parallel build — write to the
// terminal underneath (rawOut) and escape every text they print
// themselves.

// terminalWriter returns w behind an escaping writer (w itself when it is
// one already).
func terminalWriter(w io.Writer) *claude.EscapeWriter {
	if e, ok := w.(*claude.EscapeWriter); ok {
		return e
	}
	return claude.NewEscapeWriter(w)
}

// rawOut returns the writer under w's escaping, for a printer that writes
// escape sequences of its own and escapes what it prints itself; w when it
// does not escape. What w held back (the start of a UTF-8 sequence, which
// no whole line ends with) is written first.
func rawOut(w io.Writer) io.Writer {
	if e, ok := w.(*claude.EscapeWriter); ok {
		_ = e.Flush()
		return e.W
	}
	return w
}
