package serve_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/serve"
)

// .ralph/logs replaced by a link to a directory outside the project: with
// Config.Root set, nothing is served from it and no session of it is
// listed.
func TestLogDirLinkRefused(t *testing.T) {
	f := newFixture(t)
	outside := filepath.Join(t.TempDir(), "logs")
	if err := os.Rename(f.logDir, outside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, f.logDir); err != nil {
		t.Fatal(err)
	}
	_, hs := f.server(t, func(c *serve.Config) { c.Root = f.dir })
	if resp, body := get(t, hs.URL+"/logs/"+session+"/w1-iter-1.ndjson"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a raw stream through a linked .ralph/logs: %d %q", resp.StatusCode, body)
	}
	if resp, body := get(t, hs.URL+"/api/run"); resp.StatusCode != 200 || strings.Contains(body, session) {
		t.Errorf("/api/run through a linked .ralph/logs: %d %s", resp.StatusCode, body)
	}
	if resp, body := get(t, hs.URL+"/api/task/schema"); resp.StatusCode != 200 || strings.Contains(body, "w1-iter-1.ndjson") {
		t.Errorf("a task lists raw streams through a linked .ralph/logs: %d %s", resp.StatusCode, body)
	}
}
