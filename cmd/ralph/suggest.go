package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// Errors that suggest (issue 23): an unknown command or flag names the
// nearest valid one, and a value a duration flag cannot parse says the
// form a duration takes. Only the messages change; they stay usage errors
// (exit 1).

// flagError rewords a flag-parsing error of the standard flag package (the
// one urfave/cli reports) for a command whose flags are flags: an unknown
// flag gets the nearest name, a bad duration the form expected. Any other
// error is returned as it is.
func flagError(err error, flags []cli.Flag) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		if s := nearest(name, flagNames(flags)); s != "" {
			return fmt.Errorf("%w, did you mean %s?", err, dashed(s))
		}
		return err
	}
	if name, value, ok := badFlagValue(msg); ok {
		if _, isDuration := findFlag(flags, name).(*cli.DurationFlag); isDuration {
			// The start stays as the flag package words it; only
			// its "parse error" gives way to the form expected.
			return fmt.Errorf("invalid value %q for flag -%s: %s", value, name, durationHint(value))
		}
	}
	return err
}

// badFlagValue takes apart the flag package's
// `invalid value "30" for flag -timeout: parse error`.
func badFlagValue(msg string) (name, value string, ok bool) {
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, " for flag -")
	if i < 0 {
		return "", "", false
	}
	value, err := strconv.Unquote(rest[:i])
	if err != nil {
		return "", "", false
	}
	name, _, ok = strings.Cut(rest[i+len(" for flag -"):], ": ")
	return name, value, ok
}

// durationHint says what a duration flag wants instead of value.
func durationHint(value string) string {
	if _, err := strconv.ParseFloat(value, 64); err == nil {
		return "a duration needs a unit, such as 30s, 5m or 1h"
	}
	return "want a duration, a number with a unit such as 30s, 5m or 1h30m"
}

// dashed writes a flag name as a user types it: -n, --timeout.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagNames lists the names worth suggesting: every name of every flag
// but the one-letter ones.
func flagNames(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		for _, n := range f.Names() {
			if len(n) > 1 {
				names = append(names, n)
			}
		}
	}
	return names
}

// commandNames lists the commands worth suggesting: those `--help` lists,
// and `version`, which the README documents.
func commandNames(cmds []*cli.Command) []string {
	var names []string
	for _, c := range cmds {
		if c.Hidden && c.Name != "version" {
			continue
		}
		names = append(names, c.Names()...)
	}
	return names
}

// unknownCommand is the usage error for an unknown command name among
// cmds, under the command path cmd ("ralph task"); in is its text without
// the suggestion (`unknown command "frob"`).
func unknownCommand(cmd, in, name string, cmds []*cli.Command) error {
	if s := nearest(name, commandNames(cmds)); s != "" {
		in += fmt.Sprintf(", did you mean %q?", s)
	}
	return &usageError{cmd: cmd, err: errors.New(in)}
}

// nearest returns the one name among names that is nearest to typed, or
// "" when none is near enough or two are equally near. Near is at most
// two edits (a swap of neighbours counts one) and at most one edit for
// every two characters typed, or typed (three characters or more) being
// how the name starts.
func nearest(typed string, names []string) string {
	best, bestD, tie := "", 3, false
	for _, n := range names {
		if n == typed {
			return ""
		}
		d := editDistance(typed, n)
		if len(typed) >= 3 && strings.HasPrefix(n, typed) {
			d = 1
		}
		if d > 2 || 2*d > len([]rune(typed)) {
			continue
		}
		switch {
		case d < bestD:
			best, bestD, tie = n, d, false
		case d == bestD && n != best:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours, one each.
func editDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// d[i][j] is the distance between s[:i] and t[:j].
	d := make([][]int, len(s)+1)
	for i := range d {
		d[i] = make([]int, len(t)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(s); i++ {
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(s)][len(t)]
}
