package main

import (
	"os"
	"strings"
	"testing"
)

// TestErrorsSuggestThroughBinary runs the built binary on mistyped command
// lines: an unknown command or flag names the nearest valid name, a bad
// duration says the form expected, and a name with nothing near (or two
// names equally near) keeps the message it had. Each exits 1 with one line
// on stderr and nothing on stdout, as every usage error does (README, "Exit
// codes").
func TestErrorsSuggestThroughBinary(t *testing.T) {
	bin := ralphBinary(t)
	dir := t.TempDir()
	env := append(os.Environ(), "RALPH_DIR=", "RALPH_DB=", "RALPH_PLAN=")
	tests := []struct {
		args   string
		stderr string
	}{
		// Commands.
		{"stauts", `unknown command "stauts", did you mean "status"? (see 'ralph --help')`},
		{"verison", `unknown command "verison", did you mean "version"? (see 'ralph --help')`},
		{"task ad x", `unknown command "ad" for "ralph task", did you mean "add"? (see 'ralph task --help')`},
		{"task dep ad a b", `unknown command "ad" for "ralph task dep", did you mean "add"? (see 'ralph task dep --help')`},
		{"feature ad", `unknown command "ad" for "ralph feature", did you mean "add"? (see 'ralph feature --help')`},
		{"frob", `unknown command "frob" (see 'ralph --help')`},
		{"task frob", `unknown command "frob" for "ralph task" (see 'ralph task --help')`},
		// Flags: the command's own, and the global ones after a command.
		{"build --timeot 5m", `flag provided but not defined: -timeot, did you mean --timeout? (see 'ralph build --help')`},
		{"build --idle 5m", `flag provided but not defined: -idle, did you mean --idle-timeout? (see 'ralph build --help')`},
		{"task add x --priorty 1", `flag provided but not defined: -priorty, did you mean --priority? (see 'ralph task add --help')`},
		{"task list --jsn", `flag provided but not defined: -jsn, did you mean --json? (see 'ralph task list --help')`},
		{"task list --dri x", `flag provided but not defined: -dri, did you mean --dir? (see 'ralph task list --help')`},
		{"--verison", `flag provided but not defined: -verison, did you mean --version? (see 'ralph --help')`},
		{"--bogus", `flag provided but not defined: -bogus (see 'ralph --help')`},
		{"build --max 3", `flag provided but not defined: -max (see 'ralph build --help')`},
		{"task list -x", `flag provided but not defined: -x (see 'ralph task list --help')`},
		// Durations.
		{"build --timeout 30", `invalid value "30" for flag -timeout: a duration needs a unit, such as 30s, 5m or 1h (see 'ralph build --help')`},
		{"plan --idle-timeout=1.5", `invalid value "1.5" for flag -idle-timeout: a duration needs a unit, such as 30s, 5m or 1h (see 'ralph plan --help')`},
		{"task claim --lease soon", `invalid value "soon" for flag -lease: want a duration, a number with a unit such as 30s, 5m or 1h30m (see 'ralph task claim --help')`},
		// Other bad values keep their words.
		{"task add x --priority high", `invalid value "high" for flag -priority: parse error (see 'ralph task add --help')`},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, bin, dir, env, strings.Fields(tt.args)...)
			if want := "ralph: " + tt.stderr + "\n"; code != 1 || stdout != "" || stderr != want {
				t.Errorf("ralph %s: exit %d, stdout %q, stderr %q\nwant exit 1, no stdout, stderr %q", tt.args, code, stdout, stderr, want)
			}
		})
	}
}

// TestUsageErrorNearest: what counts as near, and that a tie suggests
// nothing.
func TestUsageErrorNearest(t *testing.T) {
	names := []string{"timeout", "idle-timeout", "max-cost", "max-wait", "dir", "db", "json"}
	tests := []struct{ typed, want string }{
		{"timeot", "timeout"},    // a deletion
		{"tiemout", "timeout"},   // a swap of neighbours is one edit
		{"tmeout", "timeout"},    // a deletion
		{"idle", "idle-timeout"}, // how the name starts
		{"jsn", "json"},          // one edit in three characters
		{"timeout", ""},          // the name itself: nothing to suggest
		{"max", ""},              // starts two names
		{"di", ""},               // one edit from dir and from db
		{"x", ""},                // one character: anything is one edit away
		{"js", ""},               // two edits in two characters
		{"frob", ""},
	}
	for _, tt := range tests {
		if got := nearest(tt.typed, names); got != tt.want {
			t.Errorf("nearest(%q) = %q, want %q", tt.typed, got, tt.want)
		}
	}
	for _, tt := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"ab", "ba", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3}, {"né", "ne", 1}} {
		if got := editDistance(tt.a, tt.b); got != tt.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.d)
		}
	}
}
