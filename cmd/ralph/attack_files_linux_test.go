//go:build linux

package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAttackServeLogSwap is issue 20's item 12 through the binary: while
// requests for a raw stream come in, the agent's stand-in trades the
// stream (and, in a second round, its session directory) with a link to a
// secret, atomically (renameat2 RENAME_EXCHANGE), again and again. ralph
// serve never serves the secret; it serves the real stream whenever it
// finds the real one there.
func TestAttackServeLogSwap(t *testing.T) {
	e := newProject(t, nil)
	filesAddTasks(e, 1)
	agent, _ := fakeAgentPath(t, agentStep{Text: done})
	if r := e.run("build", "--claude", agent); r.code != 0 {
		t.Fatalf("build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	dirs, _ := filepath.Glob(filepath.Join(e.dir, ".ralph", "logs", "session-*", "iter-1.ndjson"))
	if len(dirs) != 1 {
		t.Fatalf("raw streams %v, want one", dirs)
	}
	stream := dirs[0]
	session := filepath.Base(filepath.Dir(stream))
	s := startBrowserServe(t, e.bin, e.dir, e.env, "--addr", "127.0.0.1:0")
	url := strings.TrimSuffix(s.url, "/") + "/logs/" + session + "/iter-1.ndjson"

	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "iter-1.ndjson"), []byte(filesSecretContent), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, real, target string }{
		{"stream", stream, filepath.Join(outside, "iter-1.ndjson")},
		{"session directory", filepath.Dir(stream), outside},
	} {
		t.Run(c.name, func(t *testing.T) {
			link := c.real + ".link"
			if err := os.Symlink(c.target, link); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(link)
			var stop atomic.Bool
			var wg sync.WaitGroup
			swaps := 0
			wg.Go(func() {
				for !stop.Load() {
					if err := unix.Renameat2(unix.AT_FDCWD, c.real, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
						t.Errorf("renameat2: %v", err)
						return
					}
					swaps++
				}
			})
			total, served, leaked := 0, 0, 0
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) {
				resp, err := http.Get(url)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				total++
				if strings.Contains(string(body), "the-secret") {
					leaked++
				}
				if resp.StatusCode == 200 && strings.Contains(string(body), `"type":"system"`) {
					served++
				}
			}
			stop.Store(true)
			wg.Wait()
			// Leave the real one in its place.
			if fi, err := os.Lstat(c.real); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				unix.Renameat2(unix.AT_FDCWD, c.real, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
			}
			t.Logf("%d requests during %d swaps: %d served the stream, %d the secret", total, swaps, served, leaked)
			if leaked > 0 {
				t.Errorf("%d of %d requests served the file outside .ralph/logs", leaked, total)
			}
			if served == 0 || swaps == 0 {
				t.Error("the race did not run as meant")
			}
		})
	}
}
