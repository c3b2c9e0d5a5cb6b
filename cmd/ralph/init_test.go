package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// OLDHOOK is the hook command an earlier ralph installed, NEWHOOK today's,
// as JSON strings.
const (
	OLDHOOK = `"[ -n \"$RALPH_AGENT_ID\" ] && \"${RALPH_BIN:-ralph}\" task release --agent \"$RALPH_AGENT_ID\" || true"`
	NEWHOOK = `"[ -z \"$RALPH_HOLDER\" ] || \"${RALPH_BIN:-ralph}\" hook session-end || true"`
)

const newSettings = `{
  "hooks": {
    "SessionEnd": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "[ -z \"$RALPH_HOLDER\" ] || \"${RALPH_BIN:-ralph}\" hook session-end || true"
          }
        ]
      }
    ]
  }
}
`

func TestInitCreatesProject(t *testing.T) {
	h := newHarness(t)
	out := h.ok("init")
	want := `created .ralph/
created .ralph/prompts/
created .ralph/skills/
created .ralph/logs/
created .ralph/features/
created .ralph/progress.db
created .claude/commands/ralph-build.md
created .claude/settings.json (SessionEnd hook)
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("init output (-want +got):\n%s", diff)
	}
	for _, d := range []string{".ralph/prompts", ".ralph/skills", ".ralph/logs", ".ralph/features"} {
		if fi, err := os.Stat(filepath.Join(h.dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s: not a directory (%v)", d, err)
		}
	}
	if diff := cmp.Diff(newSettings, h.read(".claude/settings.json")); diff != "" {
		t.Errorf("settings.json (-want +got):\n%s", diff)
	}
	cmd := h.read(".claude/commands/ralph-build.md")
	for _, s := range []string{"$ARGUMENTS", `"$RALPH_BIN" task claim <id>`, `"$RALPH_BIN" task done <id> --summary`,
		`"$RALPH_BIN" task fail <id> --reason`, "<task-done>ID</task-done>", "<task-failed>ID</task-failed>", "description:"} {
		if !strings.Contains(cmd, s) {
			t.Errorf("ralph-build.md lacks %q", s)
		}
	}
	// The database works and is empty.
	if diff := cmp.Diff("open=0 active=0 done=0 failed=0 blocked=0 total=0\n", h.ok("task", "plan-status")); diff != "" {
		t.Errorf("plan-status (-want +got):\n%s", diff)
	}
}

func TestInitIsIdempotent(t *testing.T) {
	h := newHarness(t)
	h.write(".claude/settings.json", `{"model": "opus"}`)
	if out := h.ok("init"); !strings.HasSuffix(out, "added the SessionEnd hook to .claude/settings.json\n") {
		t.Errorf("init output does not end with the settings update:\n%s", out)
	}
	before := h.files()
	out := h.ok("init")
	if diff := cmp.Diff("ralph is already set up in "+h.dir+"\n", out); diff != "" {
		t.Errorf("second init output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, h.files()); diff != "" {
		t.Errorf("second init changed files (-before +after):\n%s", diff)
	}
}

func TestInitKeepsExistingFiles(t *testing.T) {
	h := newHarness(t)
	h.write(".claude/commands/ralph-build.md", "my own version\n")
	h.ok("init")
	if diff := cmp.Diff("my own version\n", h.read(".claude/commands/ralph-build.md")); diff != "" {
		t.Errorf("init replaced a customised slash command (-want +got):\n%s", diff)
	}
}

func TestInitMergesSettings(t *testing.T) {
	tests := []struct {
		name     string
		existing string
		want     string // "" means: unchanged
		says     string // a line init prints, if any
	}{
		{
			name:     "empty file",
			existing: "\n",
			want:     newSettings,
		},
		{
			name: "other keys, other events and another SessionEnd hook are kept in order",
			existing: `{
  "permissions": {"allow": ["Bash(go test:*)"], "deny": []},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo pre > /tmp/log && true"}]}],
    "SessionEnd": [{"hooks": [{"type": "command", "command": "notify-send bye", "timeout": 5}]}]
  },
  "model": "opus",
  "cleanupPeriodDays": 1.5e1
}`,
			want: `{
  "permissions": {
    "allow": [
      "Bash(go test:*)"
    ],
    "deny": []
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "echo pre > /tmp/log && true"
          }
        ]
      }
    ],
    "SessionEnd": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send bye",
            "timeout": 5
          }
        ]
      },
      {
        "hooks": [
          {
            "type": "command",
            "command": "[ -z \"$RALPH_HOLDER\" ] || \"${RALPH_BIN:-ralph}\" hook session-end || true"
          }
        ]
      }
    ]
  },
  "model": "opus",
  "cleanupPeriodDays": 1.5e1
}
`,
		},
		{
			name:     "null SessionEnd",
			existing: `{"hooks": {"SessionEnd": null}}`,
			want:     newSettings,
		},
		{
			name:     "hook already there",
			existing: `{"hooks":{"SessionEnd":[{"hooks":[{"type":"command","command":` + NEWHOOK + `}]}]}}`,
			want:     "",
		},
		{
			// An earlier ralph's hook released the loop's own claim at the
			// end of every session: its command is replaced, and every
			// other byte (the user's hooks, their layout) is kept.
			name: "an earlier ralph's hook is replaced in place",
			existing: "{\n    \"hooks\": {\"SessionEnd\": [ {\"hooks\": [{\"type\":\"command\", \"command\"  :  " + OLDHOOK + " }]},\n" +
				"\t{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send  bye\", \"timeout\": 5}]}],\n" +
				"    \"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": " + OLDHOOK + "}]}]}, \"model\":\"opus\"}",
			want: "{\n    \"hooks\": {\"SessionEnd\": [ {\"hooks\": [{\"type\":\"command\", \"command\"  :  " + NEWHOOK + " }]},\n" +
				"\t{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send  bye\", \"timeout\": 5}]}],\n" +
				"    \"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": " + NEWHOOK + "}]}]}, \"model\":\"opus\"}",
			says: "replaced an earlier ralph's SessionEnd hook in .claude/settings.json\n",
		},
		{
			name:     "an adapted copy of the earlier hook",
			existing: `{"hooks":{"SessionEnd":[{"hooks":[{"type":"command","command":"ralph task release --agent \"$RALPH_AGENT_ID\""}]}]}}`,
			want:     `{"hooks":{"SessionEnd":[{"hooks":[{"type":"command","command":` + NEWHOOK + `}]}]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.write(".claude/settings.json", tt.existing)
			if out := h.ok("init"); !strings.Contains(out, tt.says) {
				t.Errorf("init printed %q, want a line %q", out, tt.says)
			}
			want := tt.want
			if want == "" {
				want = tt.existing
			}
			if diff := cmp.Diff(want, h.read(".claude/settings.json")); diff != "" {
				t.Errorf("settings.json (-want +got):\n%s", diff)
			}
			// Again: nothing more is added.
			h.ok("init")
			if diff := cmp.Diff(want, h.read(".claude/settings.json")); diff != "" {
				t.Errorf("settings.json after a second init (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInitRefusesBadSettings(t *testing.T) {
	tests := []struct {
		name     string
		existing string
		stderr   string
	}{
		{"invalid JSON", `{"hooks": [`, "invalid JSON: unexpected end of file"},
		{"not an object", `["a"]`, "the settings are not a JSON object"},
		{"hooks not an object", `{"hooks": []}`, `"hooks" is not an object`},
		{"SessionEnd not a list", `{"hooks": {"SessionEnd": {}}}`, `"hooks.SessionEnd" is not a list`},
		{"trailing garbage", `{} {}`, "invalid JSON: more than one value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.write(".claude/settings.json", tt.existing)
			before := h.files()
			r := h.run("init")
			if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, tt.stderr) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("init = %+v, want exit 1 and one line on stderr containing %q", r, tt.stderr)
			}
			if diff := cmp.Diff(before, h.files()); diff != "" {
				t.Errorf("a refused init changed files (-before +after):\n%s", diff)
			}
		})
	}
}

func TestInitRefusesCorruptDatabase(t *testing.T) {
	h := newHarness(t)
	h.write(".ralph/progress.db", "this is not sqlite, and it is long enough to have a header of sorts\n")
	before := h.files()
	r := h.run("init")
	if r.code != 1 || !strings.Contains(r.stderr, "not a ralph database") {
		t.Errorf("init = %+v, want exit 1 naming the corrupt database", r)
	}
	if diff := cmp.Diff(before, h.files()); diff != "" {
		t.Errorf("init changed files (-before +after):\n%s", diff)
	}
}
