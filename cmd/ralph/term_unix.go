//go:build unix

package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// termWidth returns the width in columns of the terminal w is, 0 when
// it cannot tell.
func termWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
