package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/agentproc"
)

func TestSweepNote(t *testing.T) {
	proc := func(pid int, cmd string) agentproc.Leftover { return agentproc.Leftover{PID: pid, Command: cmd} }
	tests := []struct {
		name  string
		swept agentproc.Swept
		want  string
	}{
		{name: "nothing"},
		{name: "a stale file alone is not worth a line", swept: agentproc.Swept{Files: []string{"/tmp/ralph-system-prompt-1-2-0000abcd-3.md"}}},
		{
			name:  "one process and its file",
			swept: agentproc.Swept{Processes: []agentproc.Leftover{proc(42, "sleep 60")}, Files: []string{"/tmp/f"}},
			want:  "note: stopped 1 process left running by a ralph that is gone: 42 sleep 60; removed 1 temporary file of it",
		},
		{
			name: "many processes, long command lines",
			swept: agentproc.Swept{Processes: []agentproc.Leftover{
				proc(10, "/usr/local/bin/claude -p --verbose --output-format stream-json"), proc(11, "bash -c npm test"),
				proc(12, "node server.js"), proc(13, "sleep 1"), proc(14, "sleep 2"),
			}, Files: []string{"/tmp/a", "/tmp/b"}},
			want: "note: stopped 5 processes left running by a ralph that is gone: 10 /usr/local/bin/claude -p --verbose --out…, 11 bash -c npm test, 12 node server.js and 2 more; removed 2 temporary files of it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, sweepNote(tt.swept)); diff != "" {
				t.Errorf("sweepNote (-want +got):\n%s", diff)
			}
		})
	}
}
