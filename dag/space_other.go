//go:build !unix

package dag

// writeTrouble cannot tell why a write failed here: the error says what
// SQLite says.
func writeTrouble(dir string) string { return "" }
