package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/loop"
)

// Agents other than Claude Code get the project's custom slash commands
// expanded by their runners (loop.ExpandSlashCommand, tested there): the
// /ralph-build command 'ralph init' installs expands to its text with the
// peek in place.
func TestExpandSlashCommand(t *testing.T) {
	root := t.TempDir()
	cmds := filepath.Join(root, ".claude", "commands")
	if err := os.MkdirAll(cmds, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cmds, "ralph-build.md"), ralphBuildCommand, 0o644); err != nil {
		t.Fatal(err)
	}
	peek := "## Claimable\n- t-1 Do it\n"
	got := loop.ExpandSlashCommand(root, "/ralph-build "+peek)
	if strings.HasPrefix(got, "/") || strings.Contains(got, "$ARGUMENTS") || strings.Contains(got, "argument-hint:") ||
		!strings.Contains(got, "You are one iteration of a ralph build loop") || !strings.Contains(got, peek) {
		t.Errorf("/ralph-build expanded to:\n%s", got)
	}
}

// Picking an agent: a name ralph does not run, flags that do not go
// together, or a missing executable is said before anything is claimed,
// and the plan is left as it was.
func TestAgentCLIBadInput(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown agent", nil, []string{"--agent-cli", "cursor"},
			`--agent-cli "cursor": not an agent ralph runs; want one of claude, codex, gemini, opencode`},
		{"unknown agent from the environment", map[string]string{"RALPH_AGENT_CLI": "amp"}, nil,
			`$RALPH_AGENT_CLI "amp": not an agent ralph runs`},
		{"unknown verifier", nil, []string{"--verify", "--verify-agent-cli", "cursor"},
			`--verify-agent-cli "cursor": not an agent ralph runs`},
		{"verifier without --verify", nil, []string{"--verify-agent-cli", "codex"},
			"--verify-agent-cli goes with --verify"},
		{"--claude for another agent", nil, []string{"--agent-cli", "codex", "--claude", "/bin/true"},
			"--claude names Claude Code's executable, but the agent is codex: use --agent-bin"},
		{"missing codex", nil, []string{"--agent-cli", "codex", "--agent-bin", "/nonexistent/codex"},
			`--agent-bin "/nonexistent/codex" is not an executable`},
		{"missing codex from the environment", map[string]string{"RALPH_CODEX": "/nonexistent/codex"}, []string{"--agent-cli", "codex"},
			`$RALPH_CODEX "/nonexistent/codex" is not an executable`},
		{"missing verifier", map[string]string{"RALPH_GEMINI": "/nonexistent/gemini"},
			[]string{"--agent-bin", "/bin/true", "--verify", "--verify-agent-cli", "gemini"},
			`the verifier: agent executable not found: $RALPH_GEMINI "/nonexistent/gemini" is not an executable`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := initHarness(t)
			h.add("Do it")
			for k, v := range tt.env {
				h.env[k] = v
			}
			r := h.run(append([]string{"build"}, tt.args...)...)
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("build %v: exit %d, stderr %q; want exit 1 saying %q", tt.args, r.code, r.stderr, tt.want)
			}
			if got := h.ok("task", "plan-status"); got != "open=1 active=0 done=0 failed=0 blocked=0 total=1\n" {
				t.Errorf("plan-status after the refused build: %s", got)
			}
		})
	}
}
