package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Agents other than Claude Code get the project's custom slash commands
// expanded: peek mode's /ralph-build from the file 'ralph init' installs.
func TestExpandSlashCommand(t *testing.T) {
	root := t.TempDir()
	cmds := filepath.Join(root, ".claude", "commands")
	if err := os.MkdirAll(cmds, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"ralph-build.md": string(ralphBuildCommand),
		"plain.md":       "Say hello.\n",
		"front.md":       "---\ndescription: x\n---\nBefore $ARGUMENTS after, $ARGUMENTS again.\n",
	} {
		if err := os.WriteFile(filepath.Join(cmds, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	peek := "## Claimable\n- t-1 Do it\n"
	got := expandSlashCommand(root, "/ralph-build "+peek)
	if strings.HasPrefix(got, "/") || strings.Contains(got, "$ARGUMENTS") || strings.Contains(got, "argument-hint:") ||
		!strings.Contains(got, "You are one iteration of a ralph build loop") || !strings.Contains(got, peek) {
		t.Errorf("/ralph-build expanded to:\n%s", got)
	}
	tests := []struct{ prompt, want string }{
		{"/front a b", "Before a b after, a b again.\n"},
		{"/plain", "Say hello.\n"},
		{"/plain now", "Say hello.\n\nARGUMENTS: now"},
		{"/missing x", "/missing x"},     // no such command: as it is
		{"/../secret x", "/../secret x"}, // no paths
		{"Do the task.", "Do the task."}, // not a command
		{"/", "/"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, expandSlashCommand(root, tt.prompt)); diff != "" {
			t.Errorf("expandSlashCommand(%q) (-want +got):\n%s", tt.prompt, diff)
		}
	}
}
