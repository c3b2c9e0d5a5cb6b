//go:build unix

package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// receiptLockHold is how long the test holds the SQLite write lock from
// the end of the agent's session: longer than a write waits for the lock
// (dag.DefaultBusyTimeout, 5 s, the single try a receipt once had), with
// room for the loop to reach its first try.
const receiptLockHold = 8 * time.Second

// TestReceiptSurvivesWriteLock runs the binary: another process (this
// test) takes the SQLite database's write lock as the agent's session
// ends and holds it for receiptLockHold. The receipt's first write gives
// up after the busy timeout, as it did when a receipt was tried once and
// dropped (the build's notice says so); it is tried again until the lock
// is gone, so that `ralph status` counts the session and its cost, as it
// counts the task done. The 20 s lock shows nothing more: what
// matters is a lock that outlasts the first try, and the retries last a
// lease (15 minutes), as an outcome's do.
func TestReceiptSurvivesWriteLock(t *testing.T) {
	t.Parallel() // it mostly waits for the lock
	bin := ralphBinary(t)
	dir := t.TempDir()
	env := append(os.Environ(), "RALPH_DIR=", "RALPH_DB=", "RALPH_PLAN=", "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_TASK_ID=", "RALPH_SOCKET=")
	ralph := func(args ...string) (int, string, string) { return runBinary(t, bin, dir, env, args...) }
	if code, _, errs := ralph("init"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	if code, _, errs := ralph("task", "add", "Write the parser"); code != 0 {
		t.Fatalf("task add: %s", errs)
	}

	// The agent and the test meet at two FIFOs: the agent says it is
	// about to end (goFIFO), the test takes the lock and says so
	// (lockedFIFO), and only then does the agent print its result.
	// Opened read-write, neither open blocks, and closing goFIFO ends a
	// wait for an agent that never came.
	fifos := t.TempDir()
	goFIFO, lockedFIFO := filepath.Join(fifos, "go"), filepath.Join(fifos, "locked")
	for _, p := range []string{goFIFO, lockedFIFO} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	goF, err := os.OpenFile(goFIFO, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer goF.Close()
	lockedF, err := os.OpenFile(lockedFIFO, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lockedF.Close()
	agent := filepath.Join(t.TempDir(), "agent.sh")
	script := `#!/bin/sh
cat >/dev/null
echo go > ` + shQuote(goFIFO) + `
read line < ` + shQuote(lockedFIFO) + `
printf '{"type":"system","subtype":"init","session_id":"s-1","model":"stand-in"}\n'
printf '{"type":"result","subtype":"success","is_error":false,"result":"Done. <task-done>%s</task-done>","session_id":"s-1","num_turns":1,"total_cost_usd":0.0123}\n' "$RALPH_TASK_ID"
`
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, ".ralph", "progress.db")+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	held := make(chan error, 1)
	go func() { held <- holdWriteLock(t.Context(), db, goF, lockedF) }()

	code, out, errs := ralph("build", "--claude", agent)
	goF.Close() // an agent that never came: the lock holder stops waiting
	if err := <-held; err != nil {
		t.Fatalf("holding the write lock: %v (build: exit %d, %s)", err, code, errs)
	}
	if code != 0 {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if all := out + errs; !strings.Contains(all, "could not record the receipt of the build session yet") || strings.Contains(all, "receipts lack it") {
		t.Errorf("build did not say the receipt waited for the lock, or said it was lost:\n%s", all)
	}
	code, status, errs := ralph("status")
	if code != 0 {
		t.Fatalf("status: exit %d, %s", code, errs)
	}
	if !strings.Contains(status, "done=1") || !strings.Contains(status, "cost so far: $0.0123 over 1 agent session\n") {
		t.Errorf("status does not count the task done and its session's cost:\n%s", status)
	}
}

// holdWriteLock waits for the agent's word on goF, takes db's write lock,
// tells the agent on lockedF, and lets the lock go receiptLockHold later.
func holdWriteLock(ctx context.Context, db *sql.DB, goF, lockedF *os.File) error {
	if _, err := goF.Read(make([]byte, 3)); err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if _, err := lockedF.WriteString("locked\n"); err != nil {
		return err
	}
	time.Sleep(receiptLockHold) // the lock's span, not a wait for an event
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}
