package opencode

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/loop"
)

func TestArgs(t *testing.T) {
	base := []string{"run", "--format", "json", "--title", "ralph", "--print-logs", "--log-level", "ERROR"}
	tests := []struct {
		name string
		req  loop.RunRequest
		want []string
	}{
		{"a tier: OpenCode's config picks the model", loop.RunRequest{Model: "sonnet", Sandboxed: true}, base},
		{"no model", loop.RunRequest{Sandboxed: true}, base},
		{"provider/model", loop.RunRequest{Model: "anthropic/claude-opus-4-5", Sandboxed: true}, append(base, "-m", "anthropic/claude-opus-4-5")},
		{"another string is passed as is", loop.RunRequest{Model: "gpt-5", Sandboxed: true}, append(base, "-m", "gpt-5")},
		{"verifier", loop.RunRequest{Model: "opus", Tools: loop.VerifierTools}, append(base, "--agent", "build")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Args(tt.req)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, a := range got {
				if strings.Contains(a, "prompt") {
					t.Errorf("argument %q: the prompt goes on stdin", a)
				}
			}
		})
	}
}

func TestConfig(t *testing.T) {
	deny := map[string]any{"bash": "deny", "edit": "deny", "webfetch": "deny"}
	tests := []struct {
		name    string
		user    string
		req     loop.RunRequest
		file    string
		want    map[string]any // nil: Config returns user unchanged
		wantErr bool
	}{
		{"work session without a system prompt", `{"model":"a/b"}`, loop.RunRequest{Sandboxed: true}, "", nil, false},
		{"work session", "", loop.RunRequest{Sandboxed: true}, "/tmp/sp.md",
			map[string]any{"instructions": []any{"/tmp/sp.md"}}, false},
		{"verifier, the user's own settings kept", `{"model":"a/b","instructions":["mine.md"],"permission":{"read":"allow","bash":{"git *":"allow"}},"agent":{"build":{"model":"c/d"}}}`,
			loop.RunRequest{}, "/tmp/sp.md",
			map[string]any{"model": "a/b", "instructions": []any{"mine.md", "/tmp/sp.md"},
				"permission": map[string]any{"read": "allow", "bash": "deny", "edit": "deny", "webfetch": "deny"},
				"agent":      map[string]any{"build": map[string]any{"model": "c/d", "permission": deny}}}, false},
		{"user's config not JSON", `model = "a/b"`, loop.RunRequest{Sandboxed: true}, "/tmp/sp.md", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Config(tt.user, tt.req, tt.file, false)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), EnvConfigContent) {
					t.Errorf("error %q does not name %s", err, EnvConfigContent)
				}
				return
			}
			if tt.want == nil {
				if got != tt.user {
					t.Errorf("got %q, want the user's %q", got, tt.user)
				}
				return
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(got), &m); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, m); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnv(t *testing.T) {
	base := []string{"HOME=/h", "PWD=/where/ralph/started", "OPENAI_API_KEY=sk-user", "ANTHROPIC_API_KEY=sk-ant", "OPENCODE_CONFIG=/h/my.json"}
	req := loop.RunRequest{Sandboxed: true, Dir: "/work/tree", Env: []string{"RALPH_TASK_ID=T1"}}
	env, err := Env(base, req, "/tmp/sp.md", false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"HOME=/h", "PWD=/work/tree", "OPENAI_API_KEY=sk-user", "ANTHROPIC_API_KEY=sk-ant", "OPENCODE_CONFIG=/h/my.json",
		"RALPH_TASK_ID=T1", "OPENCODE_DISABLE_AUTOUPDATE=true", `OPENCODE_CONFIG_CONTENT={"instructions":["/tmp/sp.md"]}`}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := Env(append(base, "OPENCODE_CONFIG_CONTENT=not json"), req, "/tmp/sp.md", false); err == nil {
		t.Errorf("no error for a user's OPENCODE_CONFIG_CONTENT that is not JSON")
	}
}

func TestStateDirs(t *testing.T) {
	sts := StateDirs([]string{"HOME=/h", "XDG_DATA_HOME=/d", "XDG_CACHE_HOME=relative"})
	var got []string
	for _, st := range sts {
		got = append(got, st.Dir)
	}
	want := []string{"/d/opencode", "/h/.cache/opencode", "/h/.config/opencode", "/h/.local/state/opencode", "/h/.npm"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Only the logins pass through.
	if diff := cmp.Diff([]string{"auth.json", "mcp-auth.json"}, sts[0].Keep); diff != "" {
		t.Errorf("Keep (-want +got):\n%s", diff)
	}
}

func TestBinLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "opencode")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Bin.LookPath("", exe); err != nil || got != exe {
		t.Errorf("Bin.LookPath(\"\", %q) = %q, %v", exe, got, err)
	}
	_, err := Bin.LookPath(filepath.Join(dir, "missing"), "")
	if !errors.Is(err, loop.ErrAgentNotFound) || strings.Contains(err.Error(), "--agent-bin") || !strings.Contains(err.Error(), "opencode-ai") {
		t.Errorf("error %v: want ErrAgentNotFound saying how to install, and no flag of ralph's CLI", err)
	}
	_, err = Bin.LookPath("", filepath.Join(dir, "missing"))
	if !errors.Is(err, loop.ErrAgentNotFound) || !strings.Contains(err.Error(), "$"+EnvBin) {
		t.Errorf("error %v: want ErrAgentNotFound naming $%s", err, EnvBin)
	}
}
