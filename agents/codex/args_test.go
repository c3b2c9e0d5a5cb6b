package codex

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/loop"
)

func TestArgs(t *testing.T) {
	tests := []struct {
		name string
		req  loop.RunRequest
		file string
		want []string
	}{
		{"work session", loop.RunRequest{Sandboxed: true, Model: "gpt-5.5", SystemPrompt: "protocol"}, "/tmp/sp.md",
			[]string{"exec", "--json", "--skip-git-repo-check", "--ephemeral", "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-5.5", "-"}},
		{"verifier is read-only", loop.RunRequest{Tools: loop.VerifierTools, Model: "opus", MaxTurns: 3}, "",
			[]string{"exec", "--json", "--skip-git-repo-check", "--ephemeral", "--sandbox", "read-only", "-m", "gpt-5.5", "-c", "model_reasoning_effort=high", "-"}},
		{"tiers set the effort", loop.RunRequest{Sandboxed: true, Model: "haiku"}, "",
			[]string{"exec", "--json", "--skip-git-repo-check", "--ephemeral", "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-5.5", "-c", "model_reasoning_effort=low", "-"}},
		{"no model: Codex's own", loop.RunRequest{Sandboxed: true}, "",
			[]string{"exec", "--json", "--skip-git-repo-check", "--ephemeral", "--dangerously-bypass-approvals-and-sandbox", "-"}},
		{"replaced system prompt by file", loop.RunRequest{Sandboxed: true, SystemPrompt: "all of it", ReplaceSystemPrompt: true}, `/tmp/a "b".md`,
			[]string{"exec", "--json", "--skip-git-repo-check", "--ephemeral", "--dangerously-bypass-approvals-and-sandbox", "-c", `model_instructions_file="/tmp/a \"b\".md"`, "-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Args(tt.req, tt.file)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, a := range Args(tt.req, tt.file) {
				if tt.req.SystemPrompt != "" && strings.Contains(a, tt.req.SystemPrompt) {
					t.Errorf("the system prompt is on argv: %q", a)
				}
			}
		})
	}
}

func TestStdin(t *testing.T) {
	got := Stdin(loop.RunRequest{Prompt: "do T1", SystemPrompt: "protocol\n"})
	want := "# Instructions for this session (from ralph, the loop running it)\n\n<INSTRUCTIONS>\nprotocol\n</INSTRUCTIONS>\n\ndo T1"
	if got != want {
		t.Errorf("Stdin = %q, want %q", got, want)
	}
	if got := Stdin(loop.RunRequest{Prompt: "do T1", SystemPrompt: "all", ReplaceSystemPrompt: true}); got != "do T1" {
		t.Errorf("Stdin with a replaced system prompt = %q, want the prompt alone", got)
	}
}

func TestEnv(t *testing.T) {
	base := []string{"PATH=/bin", "OPENAI_API_KEY=sk-x", "CODEX_API_KEY=ck", "CODEX_HOME=/home/u/.codex", "A=1", "junk"}
	req := loop.RunRequest{Env: []string{"A=2", "RALPH_DIR=/p"}}
	want := []string{"PATH=/bin", "CODEX_HOME=/home/u/.codex", "A=2", "RALPH_DIR=/p"}
	if diff := cmp.Diff(want, Env(base, req)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	req.UseAPIKey = true
	want = []string{"PATH=/bin", "OPENAI_API_KEY=sk-x", "CODEX_API_KEY=ck", "CODEX_HOME=/home/u/.codex", "A=2", "RALPH_DIR=/p"}
	if diff := cmp.Diff(want, Env(base, req)); diff != "" {
		t.Errorf("with UseAPIKey (-want +got):\n%s", diff)
	}
}

func TestStateDirs(t *testing.T) {
	for env, want := range map[string]string{"CODEX_HOME=/c": "/c", "X=1": "/h/.codex"} {
		got := StateDirs([]string{"HOME=/h", env})
		if len(got) != 1 || got[0].Dir != want {
			t.Errorf("StateDirs with %s = %+v, want %s", env, got, want)
		}
		// The login passes through; the rest is the session's scratch.
		if diff := cmp.Diff([]string{"auth.json"}, got[0].Keep); diff != "" {
			t.Errorf("Keep (-want +got):\n%s", diff)
		}
	}
}

func TestBinLookPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "codex")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Bin.LookPath(bin, "/nope"); err != nil || got != bin {
		t.Errorf("Bin.LookPath(flag) = %q, %v", got, err)
	}
	if got, err := Bin.LookPath("", bin); err != nil || got != bin {
		t.Errorf("Bin.LookPath(env) = %q, %v", got, err)
	}
	_, err := Bin.LookPath("", filepath.Join(dir, "missing"))
	if !errors.Is(err, loop.ErrAgentNotFound) || !strings.Contains(err.Error(), "$RALPH_CODEX") {
		t.Errorf("missing $RALPH_CODEX: %v", err)
	}
	t.Setenv("PATH", dir+"/none")
	_, err = Bin.LookPath("", "")
	if !errors.Is(err, loop.ErrAgentNotFound) || !strings.Contains(err.Error(), "no codex on PATH") {
		t.Errorf("none on PATH: %v", err)
	}
}
