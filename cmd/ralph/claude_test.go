package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/claude/claudetest"
)

// TestSlashCommandWithRealClaude checks the integration init installs
// against the real Claude Code: in a project after `ralph init`, the prompt
// "/ralph-build <peek markdown>" (what peek mode sends) reaches the model as
// ralph-build.md with the whole multi-line peek in place of $ARGUMENTS.
func TestSlashCommandWithRealClaude(t *testing.T) {
	bin := claudetest.Binary(t)
	h := initHarness(t)
	h.add("Set up the schema", "-d", "DESCRIPTION-MARKER")
	peek := h.ok("task", "peek")

	api := claudetest.NewAPI(t, func(claudetest.Request) claudetest.Reply { return claudetest.Text("ok") })
	cmd := exec.CommandContext(t.Context(), bin, "-p", "--verbose", "--output-format", "stream-json",
		"--no-session-persistence", "--model", "sonnet")
	cmd.Dir = h.dir
	cmd.Stdin = strings.NewReader("/ralph-build " + peek)
	cmd.Env = append(os.Environ(), api.Env(t.TempDir())...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"ralph-build"`) {
		t.Errorf("the init event does not list the ralph-build command:\n%.2000s", out)
	}
	var texts []string
	for _, r := range api.Requests() {
		text := r.UserText()
		texts = append(texts, text)
		if strings.Contains(text, "You are one iteration of a ralph build loop") {
			if !strings.Contains(text, strings.TrimSpace(peek)) {
				t.Errorf("the expanded command lacks the peek:\n%s", text)
			}
			if strings.Contains(text, "$ARGUMENTS") {
				t.Errorf("$ARGUMENTS was not replaced:\n%s", text)
			}
			return
		}
	}
	t.Errorf("no request carried the expanded /ralph-build command; user texts sent:\n%q", texts)
}
