//go:build linux

package safefile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ralph-dev/ralph/safefile"
)

// TestExchangeRace trades a link and the real file (or directory) places
// atomically (renameat2 RENAME_EXCHANGE), so that the name always exists
// and is a link half of the time, while the file is appended to and read
// again and again: nothing outside is ever written or read. os.OpenFile
// of the same path, as a control, is shown to be fooled.
func TestExchangeRace(t *testing.T) {
	if testing.Short() {
		t.Skip("a race of a second")
	}
	for _, at := range []string{".ralph/logs/s", ".ralph/logs/s/iter-1.ndjson"} {
		for _, control := range []bool{false, true} {
			name := at
			if control {
				name += " (control: os.OpenFile)"
			}
			t.Run(name, func(t *testing.T) {
				base, secret := project(t)
				elsewhere := filepath.Join(filepath.Dir(secret), "elsewhere")
				os.MkdirAll(elsewhere, 0o755)
				inElsewhere := filepath.Join(elsewhere, "iter-1.ndjson")
				os.WriteFile(inElsewhere, []byte("secret\n"), 0o644)
				target := secret
				if at == ".ralph/logs/s" {
					target = elsewhere
				}
				p := filepath.Join(base, at)
				file := filepath.Join(base, ".ralph/logs/s/iter-1.ndjson")
				if err := os.WriteFile(file, []byte("own\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				link := p + ".link"
				if err := os.Symlink(target, link); err != nil {
					t.Fatal(err)
				}
				var stop atomic.Bool
				var wg sync.WaitGroup
				wg.Go(func() {
					for !stop.Load() {
						if err := unix.Renameat2(unix.AT_FDCWD, p, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
							t.Errorf("renameat2: %v", err)
							return
						}
					}
				})
				opened, refused, leaked := 0, 0, 0
				deadline := time.Now().Add(time.Second)
				for time.Now().Before(deadline) {
					var f *os.File
					var err error
					if control {
						f, err = os.OpenFile(file, os.O_RDWR|os.O_APPEND, 0)
					} else {
						f, err = safefile.Append(base, file, 0o644)
					}
					if err == nil {
						b := make([]byte, 6)
						if n, _ := f.ReadAt(b, 0); strings.HasPrefix(string(b[:n]), "secret") {
							leaked++
						}
						f.Close()
						opened++
					} else if errors.Is(err, safefile.ErrLink) {
						refused++
					}
				}
				stop.Store(true)
				wg.Wait()
				t.Logf("opened %d, refused %d, opened outside %d", opened, refused, leaked)
				if control {
					if leaked == 0 {
						t.Error("the control never opened the file outside: the race did not run as meant")
					}
					return
				}
				if leaked > 0 {
					t.Errorf("opened the file outside %d times", leaked)
				}
				unchanged(t, secret, "secret\n")
				unchanged(t, inElsewhere, "secret\n")
				if opened == 0 || refused == 0 {
					t.Error("the race did not run as meant")
				}
			})
		}
	}
}
