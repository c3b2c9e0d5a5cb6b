package safefile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/safefile"
)

// project makes a base with .ralph/logs/s and a secret outside it, the
// stand-in for ~/.bashrc.
func project(t *testing.T) (base, secret string) {
	t.Helper()
	top := t.TempDir()
	base = filepath.Join(top, "proj")
	if err := os.MkdirAll(filepath.Join(base, ".ralph", "logs", "s"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, ".ralph", "progress.db"), []byte("the plan"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret = filepath.Join(top, "bashrc")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return base, secret
}

func unchanged(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s changed: %q, want %q", path, got, want)
	}
}

func wantLink(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, safefile.ErrLink) {
		t.Fatalf("error = %v, want a refused link", err)
	}
	var le *safefile.LinkError
	if !errors.As(err, &le) || le.Path != path {
		t.Errorf("refused path = %v, want %s", err, path)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "refused a link") {
		t.Errorf("message %q does not name %s and the refusal", err, path)
	}
}

func TestFinalSymlinkRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		target func(base, secret string) string
	}{
		{"outside", func(_, secret string) string { return secret }},
		{"inside the base", func(_, _ string) string { return "../../progress.db" }},
		{"dangling", func(base, _ string) string { return filepath.Join(filepath.Dir(base), "new-file") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, secret := project(t)
			link := filepath.Join(base, ".ralph", "logs", "s", "iter-3.ndjson")
			if err := os.Symlink(c.target(base, secret), link); err != nil {
				t.Fatal(err)
			}
			f, err := safefile.Append(base, ".ralph/logs/s/iter-3.ndjson", 0o644)
			if f != nil {
				f.Write([]byte("agent output\n"))
				f.Close()
			}
			wantLink(t, err, link)
			_, err = safefile.Open(base, link)
			wantLink(t, err, link)
			_, err = safefile.ReadFile(base, link)
			wantLink(t, err, link)
			if _, err := safefile.Create(base, link, 0o644); !errors.Is(err, fs.ErrExist) {
				t.Errorf("Create over a link: %v, want fs.ErrExist", err)
			}
			unchanged(t, secret, "secret\n")
			unchanged(t, filepath.Join(base, ".ralph", "progress.db"), "the plan")
			if _, err := os.Stat(filepath.Join(filepath.Dir(base), "new-file")); err == nil {
				t.Error("a dangling link's target was created")
			}
			// WriteFile replaces the link itself.
			if err := safefile.WriteFile(base, link, []byte("new"), 0o640); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(link)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
				t.Errorf("after WriteFile: %v %v, want a regular file 0640", fi, err)
			}
			unchanged(t, link, "new")
			unchanged(t, secret, "secret\n")
			unchanged(t, filepath.Join(base, ".ralph", "progress.db"), "the plan")
		})
	}
}

func TestDirectorySymlinkRefused(t *testing.T) {
	for _, at := range []string{".ralph", ".ralph/logs", ".ralph/logs/s"} {
		t.Run(at, func(t *testing.T) {
			base, secret := project(t)
			elsewhere := filepath.Join(filepath.Dir(secret), "elsewhere")
			if err := os.MkdirAll(filepath.Join(elsewhere, "logs", "s"), 0o755); err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Join(elsewhere, "s"), 0o755)
			p := filepath.Join(base, at)
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, p); err != nil {
				t.Fatal(err)
			}
			name := ".ralph/logs/s/iter-1.ndjson"
			_, err := safefile.Append(base, name, 0o644)
			wantLink(t, err, p)
			_, err = safefile.Create(base, name, 0o644)
			wantLink(t, err, p)
			err = safefile.MkdirAll(base, ".ralph/logs/s/sub", 0o755)
			wantLink(t, err, p)
			err = safefile.WriteFile(base, name, []byte("x"), 0o644)
			wantLink(t, err, p)
			_, err = safefile.ReadDir(base, ".ralph/logs")
			if at != ".ralph/logs/s" {
				wantLink(t, err, p)
			}
			var made []string
			filepath.WalkDir(elsewhere, func(path string, d fs.DirEntry, err error) error {
				if !d.IsDir() {
					made = append(made, path)
				}
				return nil
			})
			if len(made) > 0 {
				t.Errorf("files made through the link: %v", made)
			}
		})
	}
}

func TestHardLink(t *testing.T) {
	base, secret := project(t)
	link := filepath.Join(base, ".ralph", "logs", "s", "iter-1.ndjson")
	if err := os.Link(secret, link); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if runtime.GOOS == "windows" {
		t.Skip("no link count on windows")
	}
	_, err := safefile.Append(base, link, 0o644)
	wantLink(t, err, link)
	if !strings.Contains(err.Error(), "2 hard links") {
		t.Errorf("message %q does not say why", err)
	}
	unchanged(t, secret, "secret\n")
	// Reading one is allowed: the agent could read the target itself.
	if data, err := safefile.ReadFile(base, link); err != nil || string(data) != "secret\n" {
		t.Errorf("ReadFile of a hard link: %q %v", data, err)
	}
}

func TestNotRegular(t *testing.T) {
	base, _ := project(t)
	fifo := filepath.Join(base, ".ralph", "logs", "s", "iter-1.ndjson")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 2)
	go func() {
		_, err := safefile.Open(base, fifo)
		done <- err
	}()
	go func() {
		_, err := safefile.Append(base, fifo, 0o644)
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("a FIFO: %v, want not a regular file", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("opening a FIFO hung")
		}
	}
}

func TestAppendAndCreate(t *testing.T) {
	base, _ := project(t)
	name := ".ralph/logs/s/iter-1.ndjson"
	f, err := safefile.Append(base, name, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("one\n")
	f.Close()
	f, err = safefile.Append(base, filepath.Join(base, name), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("two\n")
	f.Close()
	unchanged(t, filepath.Join(base, name), "one\ntwo\n")
	if _, err := safefile.Create(base, name, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create of an existing file: %v, want fs.ErrExist", err)
	}
	f, err = safefile.Create(base, ".ralph/logs/s.log", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := safefile.Mkdir(base, ".ralph/logs/t", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := safefile.Mkdir(base, ".ralph/logs/t", 0o755); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second Mkdir: %v, want fs.ErrExist", err)
	}
	if err := safefile.MkdirAll(base, "a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(base, "a", "b", "c")); err != nil || !fi.IsDir() {
		t.Errorf("MkdirAll made no directory: %v", err)
	}
	entries, err := safefile.ReadDir(base, ".ralph/logs")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"s", "s.log", "t"}, names); diff != "" {
		t.Errorf("ReadDir (-want +got):\n%s", diff)
	}
	if _, err := safefile.Open(base, ".ralph/logs/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing file: %v, want fs.ErrNotExist", err)
	} else if !strings.Contains(err.Error(), filepath.Join(base, ".ralph/logs/missing")) {
		t.Errorf("error %q does not name the full path", err)
	}
}

func TestNamesOutsideBase(t *testing.T) {
	base, secret := project(t)
	for _, name := range []string{"..", "../bashrc", ".ralph/../../bashrc", secret, "/etc/passwd"} {
		if _, err := safefile.Open(base, name); err == nil || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Open(%q): %v, want not below the base", name, err)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct{ root, path, want string }{
		{"/p", "/p/.ralph/logs", "/p"},
		{"/p", "/p", "/p"},
		{"/p", "/pq/logs", "/pq/logs"},
		{"/p", "/logs", "/logs"},
		{"", "/logs", "/logs"},
	} {
		if got := safefile.Within(c.root, c.path, c.path); got != c.want {
			t.Errorf("Within(%q, %q) = %q, want %q", c.root, c.path, got, c.want)
		}
	}
}

// TestSwapRace swaps a link in and out of every place on the way, as fast
// as it can, while the file is opened again and again: nothing may ever
// be opened outside, nor the secret written.
func TestSwapRace(t *testing.T) {
	if testing.Short() {
		t.Skip("a race of a second")
	}
	for _, at := range []string{".ralph/logs/s", ".ralph/logs/s/iter-1.ndjson"} {
		t.Run(at, func(t *testing.T) {
			base, secret := project(t)
			elsewhere := filepath.Join(filepath.Dir(secret), "elsewhere")
			os.MkdirAll(elsewhere, 0o755)
			os.WriteFile(filepath.Join(elsewhere, "iter-1.ndjson"), []byte("secret\n"), 0o644)
			target := secret
			if at == ".ralph/logs/s" {
				target = elsewhere
			}
			p := filepath.Join(base, at)
			if at != ".ralph/logs/s" {
				os.WriteFile(p, []byte("own\n"), 0o644)
			}
			aside := p + ".aside"
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Go(func() {
				tmp := p + ".link"
				for !stop.Load() {
					os.Remove(tmp)
					os.Symlink(target, tmp)
					os.Rename(p, aside)
					os.Rename(tmp, p) // the link in place
					time.Sleep(20 * time.Microsecond)
					os.Rename(p, tmp)
					os.Rename(aside, p) // the real one back
					time.Sleep(20 * time.Microsecond)
				}
			})
			name := ".ralph/logs/s/iter-1.ndjson"
			// At least a second, and until both outcomes were met (a
			// loaded machine may take longer), at most ten.
			opened, refused := 0, 0
			start := time.Now()
			for time.Since(start) < time.Second || (opened == 0 || refused == 0) && time.Since(start) < 10*time.Second {
				f, err := safefile.Append(base, name, 0o644)
				if err == nil {
					f.WriteString("x")
					f.Close()
					opened++
				} else if errors.Is(err, safefile.ErrLink) {
					refused++
				}
				if f, err := safefile.Open(base, name); err == nil {
					b := make([]byte, 7)
					n, _ := f.Read(b)
					f.Close()
					if strings.HasPrefix(string(b[:n]), "secret") {
						t.Fatal("read the secret through a link")
					}
				}
			}
			stop.Store(true)
			wg.Wait()
			unchanged(t, secret, "secret\n")
			unchanged(t, filepath.Join(elsewhere, "iter-1.ndjson"), "secret\n")
			t.Logf("opened %d, refused %d", opened, refused)
			if refused == 0 || opened == 0 {
				t.Error("the race did not run as meant")
			}
		})
	}
}

func TestDirReuse(t *testing.T) {
	base, _ := project(t)
	d, err := safefile.OpenDir(base, ".ralph/logs")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Path() != filepath.Join(base, ".ralph", "logs") {
		t.Errorf("Path = %s", d.Path())
	}
	if err := d.WriteFile("s/a.json", []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := d.ReadFile("s/a.json"); err != nil || string(data) != "a" {
		t.Errorf("ReadFile = %q %v", data, err)
	}
	if err := d.Rename("s/a.json", "s/b.json"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("s/b.json", "c.json"); err == nil {
		t.Error("a rename between directories went through")
	}
	if _, err := d.Lstat("s/b.json"); err != nil {
		t.Error(err)
	}
	if err := d.Remove("s/b.json"); err != nil {
		t.Error(err)
	}
	sub, err := d.OpenDir("s")
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	if _, err := d.ReadDir("."); err != nil {
		t.Errorf("the Dir was closed with its sub-directory: %v", err)
	}
}

func TestReplaceFailureLeavesOld(t *testing.T) {
	base, _ := project(t)
	name := filepath.Join(base, "progress.md")
	os.WriteFile(name, []byte("old"), 0o644)
	d, err := safefile.OpenDir(base, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	crash := errors.New("crash")
	err = d.Replace("progress.md", 0o644, func(f *os.File) error { _, err := f.WriteString("new"); return err },
		func(*safefile.Dir, string, string) error { return crash })
	if !errors.Is(err, crash) {
		t.Fatalf("error = %v", err)
	}
	unchanged(t, name, "old")
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// A character device a caller names (/dev/null: logs thrown away) opens;
// no unprivileged agent can make one.
func TestCharDevice(t *testing.T) {
	if _, err := os.Stat("/dev/null"); err != nil {
		t.Skip("no /dev/null")
	}
	f, err := safefile.Append("/dev", "/dev/null", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestDirLinksAndModes: what a guard needs to put a directory back as it
// was — remove a tree, read and make links, set modes and times — acts on
// the names below the Dir and never on what a link there names.
func TestDirLinksAndModes(t *testing.T) {
	base, secret := project(t)
	outside := filepath.Join(filepath.Dir(secret), "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "kept"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := safefile.OpenDir(base, ".ralph")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	logs := filepath.Join(base, ".ralph", "logs")
	if err := os.Symlink(outside, filepath.Join(logs, "s", "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(logs, "secret")); err != nil {
		t.Fatal(err)
	}

	// Readlink reads the link itself.
	if got, err := d.Readlink("logs/secret"); err != nil || got != secret {
		t.Errorf("Readlink = %q, %v; want %s", got, err, secret)
	}
	// Chmod and Chtimes refuse a link rather than change its target.
	secretInfo, _ := os.Stat(secret)
	wantLink(t, d.Chmod("logs/secret", 0o600), filepath.Join(logs, "secret"))
	then := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	wantLink(t, d.Chtimes("logs/secret", then, then), filepath.Join(logs, "secret"))
	if now, _ := os.Stat(secret); now.Mode() != secretInfo.Mode() || !now.ModTime().Equal(secretInfo.ModTime()) {
		t.Errorf("the link's target changed: %v %v, was %v %v", now.Mode(), now.ModTime(), secretInfo.Mode(), secretInfo.ModTime())
	}
	// On a file and a directory of its own they work, to the nanosecond.
	if err := d.WriteFile("logs/f", []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Chmod("logs/f", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Chtimes("logs/f", then, then); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(logs, "f")); err != nil || fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(then) {
		t.Errorf("after Chmod and Chtimes: %v %v", fi.Mode(), fi.ModTime())
	}
	if err := d.Chmod("logs/s", 0o700); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(filepath.Join(logs, "s")); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", fi.Mode().Perm())
	}
	// Symlink makes a link (its target unchecked), never over a name.
	if err := d.Symlink("../progress.db", "logs/back"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(filepath.Join(logs, "back")); got != "../progress.db" {
		t.Errorf("link made = %q", got)
	}
	if err := d.Symlink("x", "logs/back"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Symlink over a name: %v, want fs.ErrExist", err)
	}
	// RemoveAll removes the links in a tree, not what they name.
	if err := d.RemoveAll("logs"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(logs); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after RemoveAll: %v", err)
	}
	unchanged(t, filepath.Join(outside, "kept"), "kept")
	unchanged(t, secret, "secret\n")
	if err := d.RemoveAll("logs/none"); err != nil {
		t.Errorf("RemoveAll of a missing name: %v", err)
	}

	// Every one of them refuses a link on the way.
	if err := os.Symlink(outside, logs); err != nil {
		t.Fatal(err)
	}
	wantLink(t, d.RemoveAll("logs/kept"), logs)
	_, err = d.Readlink("logs/kept")
	wantLink(t, err, logs)
	wantLink(t, d.Symlink("x", "logs/new"), logs)
	wantLink(t, d.Chmod("logs/kept", 0o600), logs)
	wantLink(t, d.Chtimes("logs/kept", then, then), logs)
	unchanged(t, filepath.Join(outside, "kept"), "kept")
	if _, err := os.Lstat(filepath.Join(outside, "new")); err == nil {
		t.Error("a link was made through a link")
	}
}

func TestHardLinks(t *testing.T) {
	base, _ := project(t)
	p := filepath.Join(base, ".ralph", "progress.db")
	if err := os.Link(p, p+".2"); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := safefile.HardLinks(fi); ok && n != 2 {
		t.Errorf("HardLinks = %d, want 2", n)
	} else if !ok && runtime.GOOS != "windows" {
		t.Error("no link count on a Unix")
	}
}
