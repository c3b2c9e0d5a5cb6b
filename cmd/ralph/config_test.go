package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfig writes the project's .ralph/config.toml.
func writeConfig(t *testing.T, h *harness, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, ".ralph", "config.toml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// settingLines are the lines of `build --dry-run`'s settings block.
func settingLines(t *testing.T, out string) map[string]string {
	t.Helper()
	_, block, ok := strings.Cut(out, "settings:\n")
	if !ok {
		t.Fatalf("no settings in the dry run:\n%s", out)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		name, rest, _ := strings.Cut(strings.TrimSpace(l), " = ")
		lines[name] = rest
	}
	return lines
}

// TestConfigDefaults: .ralph/config.toml gives build its defaults; a flag
// and an environment variable override the file, and `build --dry-run`
// says where each setting came from, after its usual lines, with the
// secrets of a webhook URL masked.
func TestConfigDefaults(t *testing.T) {
	h := initHarness(t)
	h.ok("task", "add", "First")
	writeConfig(t, h, `# defaults for this project
[build]
max-iterations = 7
test-cmd = "make test"
verify = true
max-cost = 2.5
max-wait = "2h"
notify = ["https://hooks.slack.com/services/T1/B2/s3cret", "notify-send ralph"]

[plan]
model = "opus"
`)
	t.Setenv(envNotify, "")
	out := h.ok("build", "--dry-run", "--max-iterations", "3")
	if !strings.HasPrefix(out, "next task: t-1 First\n") || !strings.Contains(out, `test command: "make test"`) {
		t.Errorf("the dry run's usual lines:\n%s", out)
	}
	got := settingLines(t, out)
	for name, want := range map[string]string{
		"max-iterations": "3 (--max-iterations)",
		"test-cmd":       `"make test" (.ralph/config.toml)`,
		"verify":         "true (.ralph/config.toml)",
		"max-cost":       "2.5 (.ralph/config.toml)",
		"max-wait":       "2h0m0s (.ralph/config.toml)",
		"notify":         `["https://hooks.slack.com/services/***/***/***", "notify-send ralph"] (.ralph/config.toml)`,
		"agent-cli":      `"claude" (default)`,
		"workers":        "0 (default)",
	} {
		if got[name] != want {
			t.Errorf("%s = %s, want %s", name, got[name], want)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("the dry run shows a webhook's secret:\n%s", out)
	}

	t.Setenv(envNotify, "https://example.com/hook") // urfave reads the process's
	h.env[envNotify] = "https://example.com/hook"   // ralph its appConfig's
	h.env[envAgentCLI] = "codex"
	got = settingLines(t, h.ok("build", "--dry-run"))
	if got["notify"] != `["https://example.com/hook"] ($RALPH_NOTIFY)` || got["agent-cli"] != `"codex" ($RALPH_AGENT_CLI)` {
		t.Errorf("with the variables: notify = %s, agent-cli = %s", got["notify"], got["agent-cli"])
	}
}

// TestConfigTakesEffect: a default from the file is the build's: a test
// command that fails on the starting tree stops it (exit 3) before any
// agent; the flag given on the command line wins.
func TestConfigTakesEffect(t *testing.T) {
	h := initHarness(t)
	h.chain(1)
	writeConfig(t, h, "[build]\ntest-cmd = \"false\"\n")
	agent, _ := fakeAgentPath(t, agentStep{Text: done})
	if r := h.build(t.Context(), agent); r.code != 3 || !strings.Contains(r.stderr, "the test gate already fails on the starting tree (false") {
		t.Fatalf("build with the file's failing test command: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := h.build(t.Context(), agent, "--test-cmd", "true"); r.code != 0 {
		t.Fatalf("build with --test-cmd true: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestConfigRefused: a file ralph cannot take is refused with words that
// name the file, the key and the fix, and nothing runs; a config.toml
// that is a link is not followed.
func TestConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"unknown key", "[build]\nmax-iteration = 3\n", "ralph: .ralph/config.toml: [build] max-iteration: ralph build has no flag --max-iteration; did you mean max-iterations? (see 'ralph build --help')"},
		{"unknown table", "[buidl]\nworkers = 2\n", "ralph: .ralph/config.toml: [buidl] is no table ralph reads: want [build], [plan], [prompt]; did you mean [build]? (see 'ralph build --help')"},
		{"a key outside a table", "workers = 2\n", `ralph: .ralph/config.toml: "workers" is no table: the keys go in [build], [plan], [prompt] (see 'ralph build --help')`},
		{"wrong type", "[build]\nworkers = \"two\"\n", "ralph: .ralph/config.toml: [build] workers: want a whole number, not a string (see 'ralph build --help')"},
		{"duration without unit", "[build]\ntimeout = \"30\"\n", `ralph: .ralph/config.toml: [build] timeout: "30": a duration needs a unit, such as 30s, 5m or 1h (see 'ralph build --help')`},
		{"syntax", "[build]\nworkers = = 2\n", "ralph: .ralph/config.toml: toml: line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := initHarness(t)
			h.chain(1)
			writeConfig(t, h, tc.text)
			agent, script := fakeAgentPath(t, agentStep{Text: done})
			r := h.build(t.Context(), agent)
			if r.code != exitError || !strings.HasPrefix(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, exitError, tc.want)
			}
			if _, err := os.Stat(script + ".calls"); !os.IsNotExist(err) {
				t.Errorf("an agent ran: %v", err)
			}
			if got := h.statuses()["t-1"]; got != "pending" {
				t.Errorf("t-1 is %s", got)
			}
		})
	}
	t.Run("link", func(t *testing.T) {
		h := initHarness(t)
		elsewhere := filepath.Join(t.TempDir(), "planted.toml")
		if err := os.WriteFile(elsewhere, []byte("[build]\ntest-cmd = \"touch pwned\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Join(h.dir, ".ralph", "config.toml")); err != nil {
			t.Fatal(err)
		}
		r := h.run("build", "--dry-run")
		if r.code != exitError || !strings.Contains(r.stderr, ".ralph/config.toml") || !strings.Contains(r.stderr, "not through a link") {
			t.Errorf("a linked config.toml: exit %d, stderr %q", r.code, r.stderr)
		}
	})
}
