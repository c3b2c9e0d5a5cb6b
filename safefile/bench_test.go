package safefile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ralph-dev/ralph/safefile"
)

// The cost of a safe open of a raw stream (.ralph/logs/<session>/iter-N.ndjson,
// three directories below the project root) against os.OpenFile of the
// same path.
func BenchmarkAppend(b *testing.B) {
	base := b.TempDir()
	os.MkdirAll(filepath.Join(base, ".ralph", "logs", "s"), 0o755)
	name := filepath.Join(base, ".ralph", "logs", "s", "iter-1.ndjson")
	os.WriteFile(name, []byte("{}\n"), 0o644)
	b.Run("os.OpenFile", func(b *testing.B) {
		for b.Loop() {
			f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("safefile.Append", func(b *testing.B) {
		for b.Loop() {
			f, err := safefile.Append(base, name, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}

func BenchmarkOpen(b *testing.B) {
	base := b.TempDir()
	os.MkdirAll(filepath.Join(base, ".ralph", "prompts"), 0o755)
	name := filepath.Join(base, ".ralph", "prompts", "build.md")
	os.WriteFile(name, []byte("prompt\n"), 0o644)
	b.Run("os.Open", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(name)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("safefile.Open", func(b *testing.B) {
		for b.Loop() {
			f, err := safefile.Open(base, name)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}
