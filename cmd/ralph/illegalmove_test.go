package main

import (
	"os"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
)

// TestIllegalMovesInWords runs the binary: every task move the task's
// status does not allow says what is wrong and the command that would
// work, not "illegal transition pending -> done"; it exits 1 as before,
// prints nothing on stdout and changes nothing. On both stores.
func TestIllegalMovesInWords(t *testing.T) {
	bin := ralphBinary(t)
	env := append(os.Environ(), "RALPH_DIR=", "RALPH_DB=", "RALPH_PLAN=", "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_TASK_ID=", "RALPH_SOCKET=")
	tests := []struct {
		args []string
		want string
	}{
		// p is pending, w in progress, d done, f failed, k blocked.
		{[]string{"claim", "w"}, "task w is in progress: it is claimed already ('ralph task show w' names its holder)"},
		{[]string{"claim", "d"}, "task d is done: there is nothing left to claim"},
		{[]string{"claim", "f"}, "task f failed: return it to pending with 'ralph task reset f', then claim it"},
		{[]string{"claim", "k"}, "task k is blocked: return it to pending with 'ralph task unblock k', then claim it"},
		{[]string{"done", "p"}, "task p is pending: it has not been claimed; claim it first with 'ralph task claim p', then mark it done"},
		{[]string{"done", "d"}, "task d is done already"},
		{[]string{"done", "f"}, "task f failed: return it to pending with 'ralph task reset f', then claim it and mark it done"},
		{[]string{"done", "k"}, "task k is blocked: return it to pending with 'ralph task unblock k', then claim it and mark it done"},
		{[]string{"fail", "p", "-r", "r"}, "task p is pending: it has not been claimed, so it cannot fail; claim it first with 'ralph task claim p', or hold it back with 'ralph task block p'"},
		{[]string{"fail", "d", "-r", "r"}, "task d is done: a done task cannot fail; for more work on it, add a task with 'ralph task add TITLE'"},
		{[]string{"fail", "f", "-r", "r"}, "task f has failed already"},
		{[]string{"fail", "k", "-r", "r"}, "task k is blocked: it has not been claimed, so it cannot fail; it stays blocked until 'ralph task unblock k'"},
		{[]string{"reset", "p"}, "task p is pending, not failed: there is nothing to reset"},
		{[]string{"reset", "w"}, "task w is in progress, not failed: only a failed task is reset; its holder gives it back with 'ralph task release --agent AGENT' ('ralph task show w' names the holder)"},
		{[]string{"reset", "d"}, "task d is done, not failed: only a failed task is reset; for more work on it, add a task with 'ralph task add TITLE'"},
		{[]string{"reset", "k"}, "task k is blocked, not failed: return it to pending with 'ralph task unblock k'"},
		{[]string{"block", "w"}, "task w is in progress: only a pending task can be blocked; its holder gives it back first with 'ralph task release --agent AGENT' ('ralph task show w' names the holder)"},
		{[]string{"block", "d"}, "task d is done: only a pending task can be blocked"},
		{[]string{"block", "f"}, "task f failed: only a pending task can be blocked; return it to pending first with 'ralph task reset f'"},
		{[]string{"block", "k"}, "task k is blocked already"},
		{[]string{"unblock", "p"}, "task p is pending, not blocked: there is nothing to unblock"},
		{[]string{"unblock", "w"}, "task w is in progress, not blocked: there is nothing to unblock"},
		{[]string{"unblock", "d"}, "task d is done, not blocked: there is nothing to unblock"},
		{[]string{"unblock", "f"}, "task f failed, not blocked: return it to pending with 'ralph task reset f'"},
	}
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			var global []string
			if store == "postgres" {
				global = []string{"--db", pgtest.URL(t), "--plan", "moves"}
			}
			ralph := func(args ...string) (int, string, string) {
				return runBinary(t, bin, dir, env, append(global, args...)...)
			}
			must := func(args ...string) {
				t.Helper()
				if code, _, errs := ralph(args...); code != 0 {
					t.Fatalf("ralph %s: exit %d, %s", strings.Join(args, " "), code, errs)
				}
			}
			must("init")
			for _, id := range []string{"p", "w", "d", "f", "k"} {
				must("task", "add", strings.ToUpper(id), "--id", id)
			}
			must("task", "claim", "w", "--agent", "agent-w")
			must("task", "claim", "d", "--agent", "agent-d")
			must("task", "done", "d", "--agent", "agent-d")
			must("task", "claim", "f", "--agent", "agent-f")
			must("task", "fail", "f", "--agent", "agent-f", "--reason", "broke")
			must("task", "block", "k", "--reason", "wait")
			_, before, _ := ralph("task", "list", "--json")
			for _, tt := range tests {
				args := append([]string{"task"}, tt.args...)
				code, out, errs := ralph(args...)
				if want := "ralph: " + tt.want + "\n"; code != exitError || out != "" || errs != want {
					t.Errorf("ralph %s: exit %d, stdout %q, stderr\n%s\nwant exit %d, stderr\n%s",
						strings.Join(args, " "), code, out, errs, exitError, want)
				}
			}
			if _, after, _ := ralph("task", "list", "--json"); after != before {
				t.Errorf("refused moves changed the plan:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}
