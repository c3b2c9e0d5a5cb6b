package agentproctest

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Error(err)
	}
	if wd, _ := os.Getwd(); !strings.HasPrefix(wd, root) {
		t.Errorf("module root %s is not above %s", root, wd)
	}
}

// fakeCLI writes a script that prints version for --version.
func fakeCLI(t *testing.T, version string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+version+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// binary runs Binary in a subtest outside CI and says whether it skipped,
// with its path.
func binary(t *testing.T, p Pinned) (path string, skipped bool) {
	t.Helper()
	t.Setenv("CI", "")
	t.Run("binary", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		path = Binary(t, p)
	})
	return path, skipped
}

func TestBinary(t *testing.T) {
	p := Pinned{Name: "Fake CLI", Version: "1.2.3", EnvVar: "RALPH_TEST_FAKE", Bin: "fake", Package: "fake-cli"}

	t.Setenv(p.EnvVar, filepath.Join(t.TempDir(), "absent"))
	if _, skipped := binary(t, p); !skipped {
		t.Error("a missing binary is not skipped")
	}

	good := fakeCLI(t, "1.2.3")
	t.Setenv(p.EnvVar, good)
	if got, skipped := binary(t, p); skipped || got != good {
		t.Errorf("Binary = %q, skipped %v; want %q", got, skipped, good)
	}

	old := fakeCLI(t, "1.2.2")
	t.Setenv(p.EnvVar, old)
	if _, skipped := binary(t, p); !skipped {
		t.Error("another release is not skipped")
	}

	// IsPinned and VersionEnv: the home is made for the run.
	suffixed := fakeCLI(t, "fake 1.2.3")
	p.IsPinned = func(out string) bool { return out == "fake "+p.Version }
	var home string
	p.VersionEnv = func(h string) []string {
		home = h
		return os.Environ()
	}
	t.Setenv(p.EnvVar, suffixed)
	if got, skipped := binary(t, p); skipped || got != suffixed {
		t.Errorf("Binary = %q, skipped %v; want %q", got, skipped, suffixed)
	}
	if home == "" {
		t.Error("VersionEnv not called")
	} else if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("the version run's home %s is left: %v", home, err)
	}
}

func TestServe(t *testing.T) {
	done := make(chan struct{})
	addr := Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), done)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("%s answered %q", addr, b)
	}
}

func TestProcessesWithEnv(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	kv := "RALPH_AGENTPROCTEST=" + t.Name()
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), kv)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if got := ProcessesWithEnv(kv); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Errorf("ProcessesWithEnv = %v, want [%d]", got, cmd.Process.Pid)
	}
	_ = cmd.Process.Kill()
	// Killed but not yet reaped: a zombie, not listed.
	deadline := time.Now().Add(5 * time.Second)
	for len(ProcessesWithEnv(kv)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := ProcessesWithEnv(kv); len(got) > 0 {
		t.Errorf("after the kill, ProcessesWithEnv = %v", got)
	}
	_ = cmd.Wait()
}
