package loop_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

// A prompt that is a custom slash command of the project is expanded the
// way Claude Code does it; anything else, and a command file that cannot
// be read safely, leaves the prompt as it is.
func TestExpandSlashCommand(t *testing.T) {
	root := t.TempDir()
	cmds := filepath.Join(root, ".claude", "commands")
	if err := os.MkdirAll(cmds, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	for name, body := range map[string]string{
		"plain.md": "Say hello.\n",
		"front.md": "---\ndescription: x\n---\nBefore $ARGUMENTS after, $ARGUMENTS again.\n",
		"big.md":   strings.Repeat("x", loop.MaxSlashCommandSize+1),
		"edge.md":  strings.Repeat("y", loop.MaxSlashCommandSize),
		secret:     "SECRET $ARGUMENTS\n",
	} {
		if !filepath.IsAbs(name) {
			name = filepath.Join(cmds, name)
		}
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An agent can write .claude/commands: a command linked to a secret,
	// or a directory of commands linked elsewhere, is not read.
	if err := os.Symlink(secret, filepath.Join(cmds, "linked.md")); err != nil {
		t.Fatal(err)
	}
	linkedRoot := t.TempDir()
	if err := os.Mkdir(filepath.Join(linkedRoot, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cmds, filepath.Join(linkedRoot, ".claude", "commands")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(cmds, "dir.md"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct{ root, prompt, want string }{
		{root, "/front a b", "Before a b after, a b again.\n"},
		{root, "/front line one\nline two", "Before line one\nline two after, line one\nline two again.\n"},
		{root, "/plain", "Say hello.\n"},
		{root, "/plain now", "Say hello.\n\nARGUMENTS: now"},
		{root, "/edge", strings.Repeat("y", loop.MaxSlashCommandSize)}, // at the cap: read
		{root, "/big x", "/big x"},                                     // over it: as it is
		{root, "/missing x", "/missing x"},                             // no such command
		{root, "/linked x", "/linked x"},                               // a link
		{linkedRoot, "/plain", "/plain"},                               // a linked directory
		{root, "/dir x", "/dir x"},                                     // not a regular file
		{root, "/../secret x", "/../secret x"},                         // no paths
		{root, "/a.b x", "/a.b x"},
		{root, "Do the task.", "Do the task."}, // not a command
		{root, " /plain", " /plain"},
		{root, "/", "/"},
		{root, "", ""},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, loop.ExpandSlashCommand(tt.root, tt.prompt)); diff != "" {
			t.Errorf("ExpandSlashCommand(%q) (-want +got):\n%.300s", tt.prompt, diff)
		}
	}

	// A FIFO planted as a command hangs nothing: it is not read.
	if err := mkfifo(filepath.Join(cmds, "fifo.md")); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { got <- loop.ExpandSlashCommand(root, "/fifo x") }()
	select {
	case g := <-got:
		if g != "/fifo x" {
			t.Errorf("ExpandSlashCommand with a FIFO for the command = %q, want the prompt as it is", g)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ExpandSlashCommand hangs on a FIFO planted as the command")
	}

	// "" is the current directory, where an agent run without Dir runs.
	t.Chdir(root)
	if got := loop.ExpandSlashCommand("", "/plain"); got != "Say hello.\n" {
		t.Errorf(`ExpandSlashCommand("", "/plain") = %q in the project, want the command`, got)
	}
}
