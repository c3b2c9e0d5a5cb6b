//go:build unix && !solaris && !aix

package loop_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ralph-dev/ralph/loop"
)

// A tree whose lock another process holds (here another open file of the
// test's) refuses a run; the message names the holders its records give,
// and never a record an agent forged with control characters.
func TestTreeBusyNamesRecordedHolders(t *testing.T) {
	cfg := testConfig(t)
	if err := os.MkdirAll(filepath.Join(cfg.Root, ".ralph"), 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := loop.Holder{Host: "elsewhere", PID: 42, Start: 7}.String()
	records := `{"writing":true,"started":"2026-01-02T03:04:05Z","agent":"agent-real","holder":"` + elsewhere + `"}` + "\n" +
		`{"writing":true,"agent":"\u001b[2J","holder":"` + elsewhere + `"}` + "\n" +
		"not json\n"
	path := filepath.Join(cfg.Root, ".ralph", "tree.lock")
	if err := os.WriteFile(path, []byte(records), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	rep, err := loop.Run(t.Context(), cfg, newStore(t, tasks("a")...), noAgent(t))
	var busy *loop.TreeBusyError
	if !errors.As(err, &busy) || rep.ExitCode() != 1 {
		t.Fatalf("%s, err %v; want refused", rep.Outcome, err)
	}
	if len(busy.Holders) != 1 || busy.Holders[0].AgentID != "agent-real" || busy.Holders[0].Holder.Host != "elsewhere" {
		t.Errorf("holders %+v; want agent-real's only", busy.Holders)
	}
	if msg := err.Error(); !strings.Contains(msg, "pid 42 on elsewhere, started ") || strings.ContainsRune(msg, 0x1b) {
		t.Errorf("message %q; want agent-real's holder, no escape", msg)
	}
}
