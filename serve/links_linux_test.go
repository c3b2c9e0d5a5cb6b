//go:build linux

package serve_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ralph-dev/ralph/serve"
)

// A link swapped in and out during requests, at the file and at the
// session directory, never makes a request serve what lies outside.
func TestLogsSwapRace(t *testing.T) {
	if testing.Short() {
		t.Skip("a race of two seconds")
	}
	for _, at := range []string{"file", "session directory"} {
		t.Run(at, func(t *testing.T) {
			f := newFixture(t)
			_, hs := f.server(t, func(c *serve.Config) { c.Root = f.dir })
			outside := filepath.Join(t.TempDir(), "home")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "w1-iter-1.ndjson"), []byte("SECRET\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			real := filepath.Join(f.logDir, session, "w1-iter-1.ndjson")
			target := filepath.Join(outside, "w1-iter-1.ndjson")
			if at == "session directory" {
				real, target = filepath.Join(f.logDir, session), outside
			}
			// The link and the real one trade places atomically
			// (renameat2 RENAME_EXCHANGE): the name always exists, a link
			// half of the time.
			link := real + ".link"
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Go(func() {
				for !stop.Load() {
					if err := unix.Renameat2(unix.AT_FDCWD, real, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
						t.Errorf("renameat2: %v", err)
						return
					}
				}
			})
			served, leaked, total := 0, 0, 0
			deadline := time.Now().Add(2 * time.Second)
			c := &http.Client{}
			for time.Now().Before(deadline) {
				resp, err := c.Get(hs.URL + "/logs/" + session + "/w1-iter-1.ndjson")
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				buf := make([]byte, 512)
				for {
					n, err := resp.Body.Read(buf)
					b.Write(buf[:n])
					if err != nil {
						break
					}
				}
				resp.Body.Close()
				total++
				if strings.Contains(b.String(), "SECRET") {
					leaked++
				}
				if resp.StatusCode == 200 {
					served++
				}
			}
			stop.Store(true)
			wg.Wait()
			t.Logf("%d requests, %d served, %d leaked", total, served, leaked)
			if leaked > 0 {
				t.Errorf("%d of %d requests served the file outside", leaked, total)
			}
			if served == 0 {
				t.Error("no request was served: the race did not run as meant")
			}
		})
	}
}
