package codex_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/agents/codex"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// A library user running Codex in peek mode, with no wrapper of their
// own: loop.Run renders "/ralph-build <peek>", and Codex gets the text of
// the project's .claude/commands/ralph-build.md with the peek in place,
// as Claude Code would, not the literal command. The agent is a fake
// `codex exec --json` that records its standard input.
func TestPeekModeExpandsSlashCommand(t *testing.T) {
	root := t.TempDir()
	cmds := filepath.Join(root, ".claude", "commands")
	if err := os.MkdirAll(cmds, 0o755); err != nil {
		t.Fatal(err)
	}
	const command = "---\ndescription: one build iteration\nargument-hint: <peek>\n---\n" +
		"You are one iteration of a ralph build loop. Claim one task:\n\n$ARGUMENTS\n"
	if err := os.WriteFile(filepath.Join(cmds, "ralph-build.md"), []byte(command), 0o644); err != nil {
		t.Fatal(err)
	}

	rec := t.TempDir()
	answer := line(map[string]any{"type": "thread.started", "thread_id": "peek-session"}) +
		line(map[string]any{"type": "turn.started"}) +
		line(map[string]any{"type": "item.completed", "item": map[string]any{"id": "item_0", "type": "agent_message", "text": "Nothing claimed."}}) +
		line(map[string]any{"type": "turn.completed", "usage": map[string]any{"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 2}})
	if err := os.WriteFile(filepath.Join(rec, "answer"), []byte(answer), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(rec, "codex")
	script := "#!/bin/sh\ncat > '" + rec + "/stdin'\ncat '" + rec + "/answer'\n"
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	store := looptest.NewMemStore(nil)
	if err := store.Add(loop.Task{ID: "t-1", Title: "Set up the schema", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	cfg := loop.DefaultConfig(root)
	cfg.ClaimMode = loop.ClaimAgent
	cfg.MaxIterations = 1
	cfg.SessionLog, cfg.RawLogs = false, false
	runner := &codex.Runner{Path: agent, Grace: 100 * time.Millisecond, ResultGrace: 100 * time.Millisecond}
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatalf("loop.Run: %v", err)
	}
	if rep.Iterations != 1 {
		t.Fatalf("report %+v: want the one peek session run", rep)
	}

	data, err := os.ReadFile(filepath.Join(rec, "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	stdin := string(data)
	// The prompt follows ralph's instructions block (codex.Stdin).
	_, prompt, ok := strings.Cut(stdin, "</INSTRUCTIONS>\n\n")
	if !ok {
		t.Fatalf("standard input has no instructions block:\n%.1000s", stdin)
	}
	if !strings.HasPrefix(prompt, "You are one iteration of a ralph build loop. Claim one task:\n\n") {
		t.Errorf("the prompt is not the command's text:\n%.1000s", prompt)
	}
	for _, bad := range []string{"/ralph-build", "$ARGUMENTS", "argument-hint:"} {
		if strings.Contains(prompt, bad) {
			t.Errorf("the prompt holds %q:\n%.1000s", bad, prompt)
		}
	}
	if !strings.Contains(prompt, "t-1") || !strings.Contains(prompt, "Set up the schema") {
		t.Errorf("the prompt lacks the peek's task:\n%.1000s", prompt)
	}
}
