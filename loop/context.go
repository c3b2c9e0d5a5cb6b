package loop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Skill is a skill found in <root>/.ralph/skills/<name>/SKILL.md.
type Skill struct {
	Name        string
	Description string
	// Path is the SKILL.md path relative to the root.
	Path string
}

// FindSkills lists the skills under <root>/.ralph/skills, sorted by name.
// A skill's name and description come from its SKILL.md frontmatter (the
// block between two "---" lines at the top: "name:" and "description:",
// plain, quoted, or a folded/literal block); the name defaults to the
// directory's. Files without a description are skipped. A link under
// .ralph/skills is refused, an error (see saferead.go).
func FindSkills(root string) ([]Skill, error) {
	return readSkills(root) // no link followed: saferead.go
}

// frontmatter parses the simple "key: value" YAML of a leading --- block.
func frontmatter(text string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return out
	}
	for i := 1; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "---" {
			break
		}
		if line == "" || line[0] == ' ' || line[0] == '\t' || line[0] == '#' {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if val == ">" || val == "|" || val == ">-" || val == "|-" {
			var parts []string
			for i+1 < len(lines) && (strings.HasPrefix(lines[i+1], " ") || strings.HasPrefix(lines[i+1], "\t")) {
				i++
				parts = append(parts, strings.TrimSpace(lines[i]))
			}
			sep := " "
			if val[0] == '|' {
				sep = "\n"
			}
			val = strings.Join(parts, sep)
		} else if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0] {
			val = val[1 : len(val)-1]
		}
		out[key] = val
	}
	return out
}

// TestCommandFromAgents returns the test command named in <root>/AGENTS.md,
// or "" when there is none. Two forms are recognised, the first found wins:
//
//   - a line "test: <cmd>" or "Test command: <cmd>" (optionally as a list
//     item, the command optionally in backticks);
//   - the first fenced code block under a heading whose text starts with
//     "Test" (e.g. "## Tests", "### Testing"); its lines are joined with
//     " && ".
func TestCommandFromAgents(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "AGENTS.md"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("loop: AGENTS.md: %w", err)
	}
	return parseTestCommand(string(data)), nil
}

func parseTestCommand(text string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	underTest, inFence := false, false
	var block []string
	var fenced string
	for sc.Scan() {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if inFence {
			if strings.HasPrefix(trim, "```") {
				if fenced == "" && len(block) > 0 {
					fenced = strings.Join(block, " && ")
				}
				inFence, block = false, nil
				continue
			}
			if underTest && trim != "" && !strings.HasPrefix(trim, "#") {
				block = append(block, strings.TrimPrefix(trim, "$ "))
			}
			continue
		}
		if strings.HasPrefix(trim, "```") {
			inFence = true
			continue
		}
		if strings.HasPrefix(trim, "#") {
			heading := strings.ToLower(strings.TrimSpace(strings.TrimLeft(trim, "#")))
			underTest = strings.HasPrefix(heading, "test")
			continue
		}
		item := strings.TrimSpace(strings.TrimLeft(trim, "-*"))
		lower := strings.ToLower(item)
		for _, prefix := range []string{"test:", "test command:", "tests:"} {
			if strings.HasPrefix(lower, prefix) {
				cmd := strings.TrimSpace(item[len(prefix):])
				cmd = strings.Trim(cmd, "`")
				if cmd != "" {
					return cmd
				}
			}
		}
	}
	return fenced
}

// buildContext gathers the prompt data of step 4 for a claimed task.
func buildContext(ctx context.Context, store TaskStore, root string, task Task, maxRetries int, logs []LogEntry) (PromptData, error) {
	d := PromptData{Task: task, Root: root}
	if task.ParentID != "" {
		p, err := store.Get(ctx, task.ParentID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return d, err
		}
		if err == nil {
			d.Parent = &p
		}
	}
	for _, id := range task.BlockedBy {
		b, err := store.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return d, err
		}
		if b.Status != StatusDone {
			continue
		}
		bl, err := store.Logs(ctx, id)
		if err != nil {
			return d, err
		}
		bc := BlockerContext{Task: b, Summary: Summary(bl)}
		d.Blockers = append(d.Blockers, bc)
	}
	d.Retry = retryContext(task, maxRetries, logs)
	skills, err := FindSkills(root)
	if err != nil {
		return d, err
	}
	d.Skills = skills
	if fs, ok := store.(FeatureStore); ok && task.Feature != "" {
		f, err := fs.Feature(ctx, task.Feature)
		switch {
		case errors.Is(err, ErrFeatureNotFound):
		case err != nil:
			return d, err
		default:
			fc, err := featureContext(root, f)
			if err != nil {
				return d, err
			}
			d.Feature = fc
		}
	}
	return d, nil
}

// retryContext tells the agent about earlier attempts: always for a task
// retried before (with the latest retry, fail or release reason), and for a
// task whose last attempt was released (gate or agent trouble, an expired
// lease) without counting a retry.
func retryContext(task Task, maxRetries int, logs []LogEntry) *RetryContext {
	if task.RetryCount > 0 {
		r := &RetryContext{Count: task.RetryCount, MaxRetries: maxRetries}
		for i := len(logs) - 1; i >= 0; i-- {
			if k := logs[i].Kind; k == LogRetry || k == LogFail || k == LogRelease {
				r.Reason = logs[i].Message
				break
			}
		}
		return r
	}
	for i := len(logs) - 1; i >= 0; i-- {
		switch logs[i].Kind {
		case LogClaim:
			continue
		case LogRelease, LogLeaseExpired, LogHolderGone:
			return &RetryContext{MaxRetries: maxRetries, Reason: logs[i].Message}
		}
		break
	}
	return nil
}
