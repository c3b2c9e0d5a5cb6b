// Package agentproctest is the shared test support of the agent runners'
// test packages (claude/claudetest, agents/codex/codextest,
// agents/gemini/geminitest, agents/opencode/opencodetest): it finds the
// pinned CLI a test runs (Binary), serves a fake API on 127.0.0.1 until
// the end of a test (Serve), and lists the processes an agent left
// behind (ProcessesWithEnv). It knows nothing of any one CLI: each test
// package describes its own with a Pinned.
package agentproctest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Pinned names a CLI release the tests are written against, the one
// .ci/run installs.
type Pinned struct {
	// Name is the CLI's name in messages ("Codex CLI").
	Name string
	// Version is the pinned release ("0.169.0").
	Version string
	// EnvVar is the variable that overrides the binary's path
	// ("RALPH_TEST_CODEX").
	EnvVar string
	// Bin is the binary's name, and the directory of .cache it is
	// installed in: <module root>/.cache/<Bin>/node_modules/.bin/<Bin>.
	Bin string
	// Package is the npm package to install, without the version
	// ("@openai/codex"), for the hint.
	Package string
	// IsPinned reports whether the `--version` output (trimmed) is the
	// pinned release; nil: the output is Version.
	IsPinned func(out string) bool
	// Mismatch is the message for a binary at path whose `--version` said
	// out; nil: "<path> is <Name> <out, quoted>, not the pinned <Version>".
	Mismatch func(path, out string) string
	// VersionEnv, when not nil, is the environment `--version` runs in,
	// given a throwaway home directory (made for the run, then removed);
	// nil: the caller's environment, and no home.
	VersionEnv func(home string) []string
}

// Binary returns the pinned binary p: $<EnvVar>, else <module
// root>/.cache/<Bin>/node_modules/.bin/<Bin>. Missing, or not the pinned
// release, it fails the test under CI=true and skips it elsewhere, saying
// how to install it.
func Binary(t testing.TB, p Pinned) string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := os.Getenv(p.EnvVar)
	if path == "" {
		path = filepath.Join(root, ".cache", p.Bin, "node_modules", ".bin", p.Bin)
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		Missing(t, fmt.Sprintf("%s %s not found at %s (set %s, or install it with: "+
			"npm install --no-audit --no-fund --loglevel=error --prefix %s %s@%s)",
			p.Name, p.Version, path, p.EnvVar, filepath.Join(root, ".cache", p.Bin), p.Package, p.Version))
	}
	v := binaryVersion(path, p)
	pinned := v == p.Version
	if p.IsPinned != nil {
		pinned = p.IsPinned(v)
	}
	if !pinned {
		// The streams and the classification are checked against the
		// pinned release; another one is not what CI tests.
		msg := fmt.Sprintf("%s is %s %q, not the pinned %s", path, p.Name, v, p.Version)
		if p.Mismatch != nil {
			msg = p.Mismatch(path, v)
		}
		Missing(t, msg)
	}
	return path
}

// Missing fails the test in CI (CI set) and skips it elsewhere.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

var versions sync.Map // path -> `<path> --version` output

// binaryVersion runs `path --version` once per path (see
// Pinned.VersionEnv) and returns its output trimmed, or the error.
func binaryVersion(path string, p Pinned) string {
	if v, ok := versions.Load(path); ok {
		return v.(string)
	}
	cmd := exec.Command(path, "--version")
	if p.VersionEnv != nil {
		home, err := os.MkdirTemp("", p.Bin+"test-version-")
		if err != nil {
			return err.Error()
		}
		defer os.RemoveAll(home)
		cmd.Env = p.VersionEnv(home)
	}
	out, err := cmd.Output()
	v := strings.TrimSpace(string(out))
	if err != nil {
		v = err.Error()
	}
	versions.Store(path, v)
	return v
}

// ModuleRoot is the directory of the go.mod above the working directory
// (a test runs in its package's directory).
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("agentproctest: no go.mod above %s", wd)
		}
		dir = parent
	}
}

// Serve serves h on 127.0.0.1 until the end of the test and returns its
// address (host:port). At the end it closes done first, if not nil (what
// h holds open gives up), then the server.
func Serve(t testing.TB, h http.Handler, done chan struct{}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		if done != nil {
			close(done)
		}
		_ = srv.Close()
	})
	return ln.Addr().String()
}

// ProcessesWithEnv returns the pids of the live processes (zombies aside)
// whose environment holds the entry kv, such as a test's fake API URL or
// HOME: the agents it started and their children. Only processes whose
// environment this process may read are seen.
func ProcessesWithEnv(kv string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, v := range strings.Split(string(env), "\x00") {
			if v == kv && !zombie(pid) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// NoneLeft fails t unless, within a second (a process killed a moment
// ago may still be dying), no process carries the environment entry kv;
// those still there then are killed, so that a failing test leaves
// nothing behind either.
func NoneLeft(t testing.TB, kv string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		pids := ProcessesWithEnv(kv)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range pids {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
			t.Fatalf("processes left behind: %v", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// Cancelled fails t unless the run that returned at returned was
// cancelled (the time sent on cancelled, when what started its process)
// at most 3 s before, and nothing carrying the environment entry kv is
// left (NoneLeft): a cancelled gate, setup or agent ends at once, its
// process group with it.
func Cancelled(t testing.TB, what string, cancelled <-chan time.Time, returned time.Time, kv string) {
	t.Helper()
	select {
	case at := <-cancelled:
		if d := returned.Sub(at); d > 3*time.Second {
			t.Errorf("the run returned %v after the cancel", d)
		}
	default:
		t.Fatalf("the %s never started its process", what)
	}
	NoneLeft(t, kv)
}
