package servetest

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
)

// tallPage is a page three windows tall whose script counts its loads.
const tallPage = `<!doctype html><title>tall</title>
<body style="margin:0"><div id="box" style="height:%dpx;background:#36c">tall</div>
<script src="/count.js"></script>`

// TestBrowser drives a page in the real browser and takes a screenshot of
// all of it; when the subtest that owns the browser ends, no process of
// that browser is left.
func TestBrowser(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the leftover processes are looked for in /proc")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/count.js" {
			w.Header().Set("Content-Type", "text/javascript")
			w.Write([]byte(`window.loads = (window.loads || 0) + 1; document.title = "drawn";`))
			return
		}
		fmt.Fprintf(w, tallPage, 3*WindowHeight)
	}))
	defer srv.Close()
	t.Setenv(EnvArtifacts, t.TempDir())

	var dir string
	t.Run("page", func(t *testing.T) {
		ctx := Browser(t)
		dir = ctx.Value(browserKey{}).(*browser).dir
		if len(processesUsing(dir)) == 0 {
			t.Fatal("no process of the browser found by its profile directory: the leftover check would see nothing")
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL)); err != nil {
			t.Fatal(err)
		}
		if got := Wait[string](t, ctx, 10*time.Second, `document.title === "drawn" && document.title`); got != "drawn" {
			t.Errorf("title %q", got)
		}
		if got := Eval[int](t, ctx, `document.getElementById("box").offsetHeight`); got != 3*WindowHeight {
			t.Errorf("box height %d, want %d", got, 3*WindowHeight)
		}
		if got := Eval[[]int](t, ctx, `[window.innerWidth, window.innerHeight]`); got[0] != WindowWidth {
			t.Errorf("viewport %v, want %d wide", got, WindowWidth)
		}

		path := Screenshot(t, ctx, "tall page")
		if want := filepath.Join(os.Getenv(EnvArtifacts), "TestBrowser_page-tall_page.png"); path != want {
			t.Errorf("saved as %s, want %s", path, want)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("the screenshot is not a PNG: %v", err)
		}
		// The whole page, not the viewport: three windows tall.
		if size := img.Bounds().Size(); size.X != WindowWidth || size.Y < 3*WindowHeight {
			t.Errorf("screenshot %v, want %d×≥%d", size, WindowWidth, 3*WindowHeight)
		}
	})
	if dir == "" {
		return
	}
	if left := processesUsing(dir); len(left) > 0 {
		t.Errorf("processes of the browser alive after its test ended: %v", left)
	}
}

// TestBrowserKilled: a browser whose main process is gone (killed, as a
// crash would) still leaves no child behind, and the test learns of it.
func TestBrowserKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the leftover processes are looked for in /proc")
	}
	var dir string
	t.Run("killed", func(t *testing.T) {
		ctx := Browser(t)
		b := ctx.Value(browserKey{}).(*browser)
		dir = b.dir
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
			t.Fatal(err)
		}
		// Kill the processes that lead: the shell script and the browser,
		// not its renderers and zygotes.
		killPID(b.cmd.Process.Pid)
		for _, pid := range processesUsing(dir) {
			if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); !bytes.Contains(cmdline, []byte("--type=")) {
				killPID(pid)
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := chromedp.Run(rctx, chromedp.Evaluate[int](`1`)); err == nil {
			t.Error("the page still answers with its browser killed")
		}
	})
	if left := processesUsing(dir); len(left) > 0 {
		t.Errorf("processes of the killed browser alive after its test ended: %v", left)
	}
}

func TestFileName(t *testing.T) {
	got := []string{fileName("TestServe/graph-1,000 tasks"), fileName("a/../b")}
	want := []string{"TestServe_graph-1_000_tasks", "a_.._b"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
	if strings.Contains(fileName("x/y\\z"), "/") {
		t.Error("a slash is left")
	}
}
