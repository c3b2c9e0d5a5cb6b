package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/agents/codex"
	"github.com/ralph-dev/ralph/agents/gemini"
	"github.com/ralph-dev/ralph/agents/opencode"
	"github.com/ralph-dev/ralph/claude"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
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
		{"an agent named twice", nil, []string{"--agent-cli", "claude,codex,claude"},
			`--agent-cli "claude,codex,claude": claude is named twice`},
		{"an unknown agent in a list", nil, []string{"--agent-cli", "claude,cursor"},
			`--agent-cli "cursor": not an agent ralph runs`},
		{"an empty name in a list", map[string]string{"RALPH_AGENT_CLI": "claude,,codex"}, nil,
			`$RALPH_AGENT_CLI "claude,,codex": an empty name in the list`},
		{"--agent-bin with several agents", nil, []string{"--agent-cli", "claude,codex", "--agent-bin", "/bin/true"},
			"--agent-bin names one executable, but --agent-cli names 2 agents: give each its $RALPH_<CLI>"},
		{"--claude without claude in the list", nil, []string{"--agent-cli", "codex,gemini", "--claude", "/bin/true"},
			"--claude names Claude Code's executable, but --agent-cli does not name claude"},
		{"a missing agent of several", map[string]string{"RALPH_CODEX": "/nonexistent/codex"}, []string{"--agent-cli", "claude,codex", "--claude", "/bin/true"},
			`$RALPH_CODEX "/nonexistent/codex" is not an executable`},
		{"a cost cap below zero", nil, []string{"--max-cost-per-agent", "-1"},
			"--max-cost-per-agent -1: want 0 (no cap) or more"},
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

// TestAPIKeyNotice: the CLI's words for the API key variables that are
// set and --use-api-key.
func TestAPIKeyNotice(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		use  bool
		want string // "" for none
	}{
		{"key set, removed", []string{"ANTHROPIC_API_KEY=sk"}, false,
			"note: ANTHROPIC_API_KEY is set but not passed to the agent, to avoid per-token billing; the agent uses its own login (pass --use-api-key to use that key)"},
		{"key set, kept", []string{"ANTHROPIC_API_KEY=sk"}, true,
			"note: ANTHROPIC_API_KEY is passed to the agent (--use-api-key): usage is billed per token to that key"},
		{"token set, removed", []string{"ANTHROPIC_AUTH_TOKEN=tok"}, false,
			"note: ANTHROPIC_AUTH_TOKEN is set but not passed to the agent, to avoid per-token billing; the agent uses its own login (pass --use-api-key to use that key)"},
		{"both set, removed", []string{"ANTHROPIC_API_KEY=sk", "ANTHROPIC_AUTH_TOKEN=tok"}, false,
			"note: ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN are set but not passed to the agent, to avoid per-token billing; the agent uses its own login (pass --use-api-key to use them)"},
		{"both set, kept", []string{"ANTHROPIC_API_KEY=sk", "ANTHROPIC_AUTH_TOKEN=tok"}, true,
			"note: ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN are passed to the agent (--use-api-key): usage is billed per token to them"},
		{"an empty one is not set", []string{"ANTHROPIC_API_KEY=sk", "ANTHROPIC_AUTH_TOKEN="}, false,
			"note: ANTHROPIC_API_KEY is set but not passed to the agent, to avoid per-token billing; the agent uses its own login (pass --use-api-key to use that key)"},
		{"none, asked to use them", nil, true,
			"note: --use-api-key given but neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN is set; the agent uses its own login"},
		{"none", []string{"HOME=/root"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, apiKeyNoticeText(claude.APIKeysSet(tt.env), tt.use)); diff != "" {
				t.Errorf("notice (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGiveVerifierShell: a Gemini CLI or OpenCode verifier gets a sandbox
// with the tree read-only where bubblewrap works, and the build says at
// the start that it cannot run commands where none does; Claude Code's and
// Codex's verifiers, and a build with --sandbox, are left alone.
func TestGiveVerifierShell(t *testing.T) {
	root := t.TempDir()
	cli := func(name string) chosenAgent {
		a, err := lookupAgentCLI(name, "--agent-cli")
		if err != nil {
			t.Fatal(err)
		}
		return chosenAgent{agentCLI: a, path: "/bin/true"}
	}
	var stderr strings.Builder
	cfg := appConfig{stderr: &stderr}
	if _, err := sandbox.Find(); err == nil {
		g := &gemini.Runner{}
		giveVerifierShell(cfg, root, cli("gemini"), g, nil)
		o := &opencode.Runner{}
		giveVerifierShell(cfg, root, cli("opencode"), o, nil)
		if g.VerifierSandbox == nil || o.VerifierSandbox == nil || stderr.Len() != 0 {
			t.Errorf("with bubblewrap: gemini %v, opencode %v, stderr %q", g.VerifierSandbox, o.VerifierSandbox, stderr.String())
		}
	}
	giveVerifierShell(cfg, root, cli("claude"), &claude.Runner{}, nil)
	giveVerifierShell(cfg, root, cli("codex"), &codex.Runner{}, nil)
	if stderr.Len() != 0 {
		t.Errorf("a notice for a verifier with a shell: %q", stderr.String())
	}

	t.Setenv("PATH", t.TempDir()) // no bwrap
	g := &gemini.Runner{}
	giveVerifierShell(cfg, root, cli("gemini"), g, nil)
	want := "ralph: note: the verifier (gemini) cannot run commands, the tests included: its CLI has no read-only shell, and no sandbox is available to give it one with the tree read-only ("
	if g.VerifierSandbox != nil || !strings.HasPrefix(stderr.String(), want) || !strings.HasSuffix(stderr.String(), "); it checks the work by reading it\n") {
		t.Errorf("without bubblewrap: sandbox %v, stderr %q", g.VerifierSandbox, stderr.String())
	}
}
