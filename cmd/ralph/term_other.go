//go:build !unix

package main

import "io"

// termWidth: unknown here (COLUMNS, or 80, then).
func termWidth(io.Writer) int { return 0 }
