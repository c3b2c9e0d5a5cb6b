package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReorderArgs(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"no arguments", "", ""},
		{"flags already first", "task list --json", "task list --json"},
		{"value flags after the title", `task add Fix -d desc --priority 1`, `task add -d desc --priority 1 -- Fix`},
		{"value flags before the title", `task add -d desc Fix`, `task add -d desc -- Fix`},
		{"attached value", `task add Fix --priority=3`, `task add --priority=3 -- Fix`},
		{"repeated slice flag around the title", `task add --blocked-by a Fix --blocked-by b`, `task add --blocked-by a --blocked-by b -- Fix`},
		{"a value that looks like a flag", `task add Fix -d --not-a-flag`, `task add -d --not-a-flag -- Fix`},
		{"boolean takes no value", `task show t1 --json`, `task show --json -- t1`},
		{"boolean before the id", `task show --json t1`, `task show --json -- t1`},
		{"two positionals", `task dep add a b`, `task dep add -- a b`},
		{"claim with flags after the id", `task claim t1 --agent a1 --lease 5m`, `task claim --agent a1 --lease 5m -- t1`},
		{"stdin dash is positional", `task import -`, `task import -- -`},
		{"double dash ends flags", `task add -- -weird --priority 1`, `task add -- -weird --priority 1`},
		{"flags then double dash", `task add -p 1 -- -weird`, `task add -p 1 -- -weird`},
		{"global flag after the command", `task list --dir /x --json`, `--dir /x task list --json`},
		{"global flag first", `--dir /x task peek -n 3`, `--dir /x task peek -n 3`},
		{"global flag at the end with positional", `task show t1 --dir=/x`, `--dir=/x task show -- t1`},
		{"unknown flag stays with the command", `task add x --bogus y`, `task add --bogus -- x y`},
		{"unknown subcommand", `task frob x`, `task -- frob x`},
		{"help command", `help task add`, `task add --help`},
		{"help subcommand", `task help dep`, `task dep --help`},
		{"bare help", `help`, `--help`},
		{"help flag", `task add --help`, `task add --help`},
		{"version", `--version`, `--version`},
		{"feature add", `feature add auth --spec s.md --plan p.md`, `feature add --spec s.md --plan p.md -- auth`},
	}
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]string{"ralph"}, strings.Fields(tt.in)...)
			want := append([]string{"ralph"}, strings.Fields(tt.want)...)
			if diff := cmp.Diff(want, reorderArgs(app, in)); diff != "" {
				t.Errorf("reorderArgs(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestHelpGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"help-root.golden", []string{"--help"}},
		{"help-task.golden", []string{"task", "--help"}},
		{"help-task-add.golden", []string{"task", "add", "--help"}},
		{"help-feature.golden", []string{"feature", "--help"}},
		{"help-serve.golden", []string{"serve", "--help"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(t.Context(), append([]string{"ralph"}, tt.args...), &out, &errb)
			if code != 0 || errb.Len() != 0 {
				t.Fatalf("exit %d, stderr %q", code, errb.String())
			}
			golden(t, tt.name, out.String())
		})
	}
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"ralph", "--version"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if diff := cmp.Diff(readVersion().line(), out.String()); diff != "" {
		t.Errorf("--version (-want +got):\n%s", diff)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"unknown command", []string{"frob"}, `ralph: unknown command "frob" (see 'ralph --help')` + "\n"},
		{"unknown task command", []string{"task", "frob"}, `ralph: unknown command "frob" for "ralph task" (see 'ralph task --help')` + "\n"},
		{"unknown dep command", []string{"task", "dep", "frob"}, `ralph: unknown command "frob" for "ralph task dep" (see 'ralph task dep --help')` + "\n"},
		{"unknown flag", []string{"task", "list", "--frob"}, "ralph: flag provided but not defined: -frob (see 'ralph task list --help')\n"},
		{"unknown global flag", []string{"--frob", "task", "list"}, "ralph: flag provided but not defined: -frob (see 'ralph --help')\n"},
		{"bad flag value", []string{"task", "add", "x", "--priority", "high"}, `ralph: invalid value "high" for flag -priority: parse error (see 'ralph task add --help')` + "\n"},
		{"too many arguments", []string{"init", "x"}, "ralph: want no arguments, got 1 argument (see 'ralph init --help')\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			r := h.run(tt.args...)
			if diff := cmp.Diff(result{code: 1, stderr: tt.stderr}, r, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"loop: no such task: \"x\"", `no such task: "x"`},
		{"parent: loop: no such task", "parent: no such task"},
		{"dag: a\nb\r\nc\n", "a; b; c"},
		{"a title with dag: inside", "a title with dag: inside"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, oneLine(tt.in)); diff != "" {
			t.Errorf("oneLine(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestInterrupted(t *testing.T) {
	h := initHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errb bytes.Buffer
	code := runApp(ctx, newAppConfig(h.config(&out, &errb)), []string{"ralph", "--dir", h.dir, "task", "list"}, &errb)
	got := result{code: code, stdout: out.String(), stderr: errb.String()}
	if diff := cmp.Diff(result{code: 130, stderr: "ralph: interrupted\n"}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
