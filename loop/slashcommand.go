package loop

import (
	"io"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/safefile"
)

// Custom slash commands. Peek mode's prompt (PromptPeek, "/ralph-build
// <peek>") is a Claude Code custom slash command: Claude Code finds
// .claude/commands/ralph-build.md in its working directory (the file
// 'ralph init' installs) and sends that file, the peek in place of
// $ARGUMENTS, to the model. Other agents would send the literal line. A
// runner whose agent does not know Claude Code's custom slash commands
// therefore passes its prompt through ExpandSlashCommand before the agent
// gets it; codex, gemini and opencode do, and so should a Runner of your
// own (runnertest.TestRunner checks it). The expansion is the runner's,
// not the loop's, so that a runner wrapped in another (a RunnerFunc that
// logs, say) keeps its own behaviour, and Claude Code keeps expanding
// its commands itself.

// MaxSlashCommandSize bounds the command file ExpandSlashCommand reads; a
// larger one leaves the prompt as it is.
const MaxSlashCommandSize = 1 << 20

// ExpandSlashCommand expands prompt the way Claude Code expands a custom
// slash command of the project in dir (RunRequest.Dir; "" is the current
// directory): a prompt "/NAME ARGS" where dir/.claude/commands/NAME.md is
// a regular file becomes that file without its front matter, every
// $ARGUMENTS replaced by ARGS, or ARGS appended under "ARGUMENTS:" when
// the file does not place them. Any other prompt is returned as it is,
// and so is one whose command file is missing, unreadable, a symbolic
// link (anywhere below dir: an agent can write .claude/commands/, and a
// command linked to a secret would send it to the model; package
// safefile) or larger than MaxSlashCommandSize.
func ExpandSlashCommand(dir, prompt string) string {
	rest, ok := strings.CutPrefix(prompt, "/")
	if !ok {
		return prompt
	}
	name, args, _ := strings.Cut(rest, " ")
	if name == "" || strings.ContainsAny(name, `/\.`) {
		return prompt
	}
	if dir == "" {
		dir = "."
	}
	body, ok := readCommand(dir, filepath.Join(".claude", "commands", name+".md"))
	if !ok {
		return prompt
	}
	if fm, ok := strings.CutPrefix(body, "---\n"); ok {
		if _, after, ok := strings.Cut(fm, "\n---\n"); ok {
			body = after
		}
	}
	if strings.Contains(body, "$ARGUMENTS") {
		return strings.ReplaceAll(body, "$ARGUMENTS", args)
	}
	if args == "" {
		return body
	}
	// A command that does not place its arguments gets them at its end.
	return strings.TrimRight(body, "\n") + "\n\nARGUMENTS: " + args
}

// readCommand reads the command file rel below dir through safefile, up
// to MaxSlashCommandSize; ok is false when it cannot be read whole.
func readCommand(dir, rel string) (string, bool) {
	f, err := safefile.Open(dir, rel)
	if err != nil {
		return "", false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSlashCommandSize+1))
	if err != nil || len(data) > MaxSlashCommandSize {
		return "", false
	}
	return string(data), true
}
