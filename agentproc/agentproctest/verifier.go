package agentproctest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ralph-dev/ralph/sandbox"
)

// VerifierBoundary is a read-only sandbox over dir, for a runner's
// verifier (VerifierSandbox): the test skips where bubblewrap cannot run,
// and fails under CI, where it must.
func VerifierBoundary(t testing.TB, dir string) *sandbox.Boundary {
	t.Helper()
	sb, err := sandbox.Find()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	box, err := sb.Boundary(sandbox.BoundaryParams{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// WriteTestCommand writes the project a read-only verifier is asked to
// test: test.sh, which prints "tests: 3 passed" from a file beside it.
func WriteTestCommand(t testing.TB, dir string) {
	t.Helper()
	for name, content := range map[string]string{"test.sh": "echo \"tests: $(cat count) passed\"\n", "count": "3"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
