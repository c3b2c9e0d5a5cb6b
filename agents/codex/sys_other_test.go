//go:build !unix

package codex_test

// maxRSSMB is not known outside Unix.
func maxRSSMB() int64 { return 0 }
