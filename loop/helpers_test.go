package loop_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ralph-dev/ralph/loop/looptest"
)

func writeFile(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func looptestRunner(t *testing.T) *looptest.FakeRunner {
	t.Helper()
	return looptest.NewFakeRunner(t).Always(agent(done, ""))
}
