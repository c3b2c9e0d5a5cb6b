package loop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/hostgit"
	"github.com/ralph-dev/ralph/safefile"
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

// TestCommandFromAgents returns the test command named in the file
// <root>/AGENTS.md as it is now, or "" when there is none. A run does not
// use it in a git repository, where an agent may have edited the file:
// it reads the committed AGENTS.md (ReadAgentsTest). Two forms are
// recognised, the first found wins:
//
//   - a line "test: <cmd>" or "Test command: <cmd>" (optionally as a list
//     item, the command optionally in backticks);
//   - the first fenced code block under a heading whose text starts with
//     "Test" (e.g. "## Tests", "### Testing"); its lines are joined with
//     " && ".
//
// The file lies where an agent can write: it is read through package
// safefile (a symbolic link, a FIFO or another file that is no regular
// file is an error, never followed or waited on) and at most
// maxAgentsFile bytes of it (a larger one is an error).
func TestCommandFromAgents(root string) (string, error) {
	f, err := safefile.Open(root, filepath.Join(root, "AGENTS.md"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("loop: AGENTS.md: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxAgentsFile+1))
	if err != nil {
		return "", fmt.Errorf("loop: AGENTS.md: %w", err)
	}
	if len(data) > maxAgentsFile {
		return "", fmt.Errorf("loop: AGENTS.md: %s is larger than %d bytes", filepath.Join(root, "AGENTS.md"), maxAgentsFile)
	}
	return parseTestCommand(string(data)), nil
}

// maxAgentsFile caps the AGENTS.md ralph reads (1 MiB).
const maxAgentsFile = 1 << 20

// AgentsTest is the test command AGENTS.md names, as a run read it when it
// began (ARCHITECTURE.md §7: a test command an agent wrote into AGENTS.md
// must not become one ralph runs).
type AgentsTest struct {
	// Command is the test command; "" when AGENTS.md names none.
	Command string
	// Commit is the commit whose tree AGENTS.md was read from: HEAD's
	// when the run began. "" when Root is in no git repository (the file
	// was read then, once).
	Commit string
	// Uncommitted is the command the working copy's AGENTS.md names where
	// it differs from the committed one: not run, only announced.
	Uncommitted string
}

// ReadAgentsTest reads the test command of <root>/AGENTS.md for a run
// that begins now: in a git repository from the tree of the commit HEAD
// names (none before the first commit), never from the working copy an
// agent may edit; in a directory that is no git repository, from the
// file. The run reads it once and announces it (Announcement).
func ReadAgentsTest(ctx context.Context, root string) (AgentsTest, error) {
	repo, err := hostgit.Find(root)
	if err != nil {
		c, err := TestCommandFromAgents(root)
		return AgentsTest{Command: c}, err
	}
	return readAgentsTest(ctx, repo, root)
}

func readAgentsTest(ctx context.Context, repo *hostgit.Repo, root string) (AgentsTest, error) {
	var at AgentsTest
	head, err := runGit(ctx, repo, root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if head = strings.TrimSpace(head); err == nil && head != "" {
		rel, rerr := filepath.Rel(repo.WorkTree, root)
		if rerr != nil {
			return at, fmt.Errorf("loop: AGENTS.md: %w", rerr)
		}
		path := filepath.ToSlash(filepath.Join(rel, "AGENTS.md"))
		cmd, err := repo.Command(ctx, root, "cat-file", "--batch")
		if err != nil {
			return at, fmt.Errorf("loop: AGENTS.md: %w", err)
		}
		cmd.Stdin = strings.NewReader(head + ":" + path + "\n")
		out, err := cmd.Output()
		if err != nil {
			return at, fmt.Errorf("loop: AGENTS.md at %s: %w", head, err)
		}
		at.Commit = head
		// "<id> blob <size>\n<content>\n", or "<name> missing\n".
		if line, rest, ok := strings.Cut(string(out), "\n"); ok && strings.Contains(line, " blob ") {
			at.Command = parseTestCommand(strings.TrimSuffix(rest, "\n"))
		}
	}
	if wc, err := TestCommandFromAgents(root); err == nil && wc != "" && wc != at.Command {
		at.Uncommitted = wc
	}
	return at, nil
}

// Announcement is what a run says of the test command it took from
// AGENTS.md: the command and the commit it was read from, and an
// uncommitted command that is not run. "" when there is nothing to say.
// The run sends it as a notice whose Note.AgentsTest is at, so that a
// program can word the advice for an uncommitted command (set
// Config.TestCmd) in its own terms.
func (at AgentsTest) Announcement() string {
	var parts []string
	switch {
	case at.Command != "" && at.Commit != "":
		parts = append(parts, fmt.Sprintf("test gate: %q, from AGENTS.md at commit %s (read when the run began; edits to AGENTS.md during the run are not used)", at.Command, shortID(at.Commit)))
	case at.Command != "":
		parts = append(parts, fmt.Sprintf("test gate: %q, from AGENTS.md (read once, when the run began: the project is no git repository)", at.Command))
	}
	if at.Uncommitted != "" {
		parts = append(parts, fmt.Sprintf("AGENTS.md in the working tree names the test command %q, which is not committed: it is not run (commit it, or set Config.TestCmd)", at.Uncommitted))
	}
	return strings.Join(parts, "; ")
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
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

// agentsTest reads the AGENTS.md test command once per run — once per
// build with workers, whose first worker reads it for all.
func (r *run) agentsTest(ctx context.Context) (AgentsTest, error) {
	read := func() (AgentsTest, error) {
		if r.repo == nil {
			c, err := TestCommandFromAgents(r.cfg.Root)
			return AgentsTest{Command: c}, err
		}
		return readAgentsTest(ctx, r.repo, r.cfg.Root)
	}
	return r.cfg.Shared.agentsTest(read)
}

// announceAgentsTest says, at the start of the run, which test command
// the run took from AGENTS.md and where from (a build with workers says
// it once).
func (r *run) announceAgentsTest() {
	g, ok := r.mode.(gated)
	if !ok || g.gate().agents == nil {
		return
	}
	at := *g.gate().agents
	msg := at.Announcement()
	if msg == "" || !r.cfg.Shared.first("agents-test") {
		return
	}
	r.note.send(Note{Kind: NoteNotice, Message: msg, AgentsTest: &at})
}
