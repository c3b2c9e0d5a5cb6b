// Package servetest is the test support of the real-browser tests of
// `ralph serve`: it finds a Chromium (Chromium), starts it headless under
// the DevTools protocol for the length of a test (Browser), waits for what
// a person would see (Wait, Eval), and saves what the page looks like
// (Screenshot).
//
// The browser is driven with github.com/chromedp/chromedp over a pipe (no
// debugging port is opened). It runs in a process group of its own with a
// throwaway profile; when the test ends it is closed, then the group is
// killed and any process still naming the profile directory too, so no
// Chromium — nor a renderer, zygote or crash handler of one — outlives the
// test. Uncaught exceptions of the page fail the test; the rest of its
// console is logged.
//
// Screenshots go to $RALPH_TEST_ARTIFACTS, else <module
// root>/.artifacts/screenshots (git ignores /.artifacts/), named after the
// test; CI keeps that directory as the run's artifacts.
package servetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ralph-dev/ralph/agentproc/agentproctest"
)

// Window is the size of the browser's window, in CSS pixels: the size of
// the viewport the page is laid out for, and the width of screenshots.
const (
	WindowWidth  = 1400
	WindowHeight = 900
)

// EnvChromium names the variable that overrides the browser's path.
const EnvChromium = "RALPH_CHROMIUM"

// EnvArtifacts names the variable that overrides the screenshots'
// directory.
const EnvArtifacts = "RALPH_TEST_ARTIFACTS"

// names are the binaries Chromium looks for on $PATH, in this order: the
// headless shell Debian packages (what .ci/run installs), then the full
// browsers.
var names = []string{
	"chromium-headless-shell", "headless_shell", "chromium", "chromium-browser",
	"google-chrome", "google-chrome-stable",
}

// Chromium returns the path of the browser the tests drive:
// $RALPH_CHROMIUM, else the first of chromium-headless-shell, chromium,
// google-chrome… on $PATH. Missing, it fails the test under CI and skips it
// elsewhere, saying how to install one.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			agentproctest.Missing(t, fmt.Sprintf("$%s=%s: not a browser binary", EnvChromium, p))
		}
		return p
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	agentproctest.Missing(t, fmt.Sprintf("no Chromium found (looked for %s on $PATH); install one "+
		"(Debian: apt-get install chromium-headless-shell) or set $%s", strings.Join(names, ", "), EnvChromium))
	return ""
}

// browser is one started Chromium: its command (to find its process
// group), its profile directory (to find its processes that left the
// group), and what it wrote on stdout and stderr.
type browser struct {
	dir string
	log string // its stdout and stderr
	mu  sync.Mutex
	cmd *exec.Cmd
}

type browserKey struct{}

// Browser starts a headless Chromium for the test and returns the context
// of its first tab: pass it to chromedp.Run and the helpers here. The
// browser has a throwaway profile, a WindowWidth×WindowHeight window, no
// GPU, no extensions, and no sandbox when the test runs as root (Chromium
// refuses to start otherwise). At the end of the test it is closed and
// every process it started is killed; one still alive fails the test.
func Browser(t testing.TB) context.Context {
	t.Helper()
	path := Chromium(t)
	b := &browser{dir: t.TempDir(), log: filepath.Join(t.TempDir(), "chromium.log")}
	// A file, not a pipe: a child that outlives the browser for a moment
	// does not hold up its Wait.
	out, err := os.Create(b.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(b.dir),
		chromedp.WindowSize(WindowWidth, WindowHeight),
		chromedp.DisableGPU,
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("no-sandbox", os.Getuid() == 0),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			ownGroup(cmd)
			if cmd.Env == nil {
				cmd.Env = os.Environ()
			}
			cmd.Env = append(cmd.Env, browserEnv+"="+b.dir) // every child inherits it
			cmd.Stdout, cmd.Stderr = out, out
			b.mu.Lock()
			b.cmd = cmd
			b.mu.Unlock()
		}),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.WithValue(context.Background(), browserKey{}, b), opts...)
	ctx, cancel := chromedp.NewContext(actx)

	var wg sync.WaitGroup
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err := chromedp.Cancel(cctx)
		ccancel()
		cancel()
		cancelAlloc()
		wg.Wait()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("closing Chromium: %v", err)
		}
		if left := b.kill(); len(left) > 0 {
			t.Errorf("Chromium processes outlived the test: %v", left)
		}
		if t.Failed() {
			if out := b.output(); out != "" {
				t.Logf("Chromium's output:\n%s", out)
			}
		}
	})
	// The first Run starts the browser, bound to ctx (no timeout: it would
	// stop the browser with it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium %s: %v\n%s", path, err, b.output())
	}
	messages := chromedp.Console(ctx)
	wg.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() {
				t.Errorf("the page threw: %s", m)
			} else {
				t.Logf("console %s: %s", m.Type, m.Text)
			}
		}
	})
	return ctx
}

// kill ends every process of the browser: its process group, then any
// process whose command line names its profile directory (a child that
// made a group of its own), until a few looks find none. It returns the
// processes still alive after that, which should be none.
func (b *browser) kill() []int {
	b.mu.Lock()
	cmd := b.cmd
	b.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		killGroup(cmd.Process.Pid)
	}
	deadline := time.Now().Add(5 * time.Second)
	for quiet := 0; quiet < 3; {
		left := processesUsing(b.dir)
		if len(left) == 0 {
			quiet++
		} else {
			quiet = 0
			if time.Now().After(deadline) {
				return left
			}
			for _, pid := range left {
				killPID(pid)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Eval evaluates the JavaScript expression in the tab (with opts, such as
// chromedp.EvalAwaitPromise) and returns its value, decoded into T; an
// error fails the test.
func Eval[T any](t testing.TB, ctx context.Context, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// Wait waits until the JavaScript expression is truthy in the tab, looking
// every 20 ms, and returns its value decoded into T. After timeout it
// saves a screenshot named "timeout" and fails the test, naming the
// expression.
func Wait[T any](t testing.TB, ctx context.Context, timeout time.Duration, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expr,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		Screenshot(t, ctx, "timeout")
		t.Fatalf("waiting %v for %s: %v", timeout, expr, err)
	}
	return v
}

// Screenshot saves a PNG of the whole page (beyond the viewport) as
// <dir>/<test name>-<name>.png, where dir is $RALPH_TEST_ARTIFACTS, else
// <module root>/.artifacts/screenshots; it logs the path and returns it.
// A screenshot that cannot be taken or saved fails the test.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		root, err := agentproctest.ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".artifacts", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, fileName(t.Name()+"-"+name)+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// fileName makes a test's name (with its subtests' slashes) a file name.
func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// output is the end of what the browser wrote on stdout and stderr.
func (b *browser) output() string {
	out, _ := os.ReadFile(b.log)
	return tail(string(out), 4000)
}

// browserEnv marks the processes of a test's browser: its value is the
// browser's profile directory, which is the test's own.
const browserEnv = "RALPH_TEST_BROWSER"

// processesUsing returns the live processes of the browser whose profile
// is dir: the browser and every child it started.
func processesUsing(dir string) []int {
	return agentproctest.ProcessesWithEnv(browserEnv + "=" + dir)
}
