package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// reorderArgs lets flags come before or after positional
// arguments. urfave/cli v2 stops parsing a command's flags at its
// first positional argument, so `ralph task add "Fix login" -d x` would
// take "-d" and "x" as more positionals. reorderArgs rewrites the command
// line into the order cli parses:
//
//	prog [global flags] cmd [cmd flags] sub [sub flags] … -- positionals…
//
// Each flag is kept with its value: a flag that takes a value consumes the
// next argument unless written --flag=value; booleans never do. A flag is
// looked up on the command being parsed first, then among the global flags
// (so `ralph task list --dir X` works too); an unknown flag stays where cli
// will report it. Everything after a "--" is positional, as is "-" (stdin).
// A "--" is put before the positionals so that one starting with "-" cannot
// be taken for a flag. "help" in place of a command asks for the help of
// the command named after it.
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	type level struct {
		name  string
		flags []string
		cmd   *cli.Command // nil for the root
	}
	levels := []level{{}}
	var positionals []string
	cur := func() *level { return &levels[len(levels)-1] }
	subs := func() []*cli.Command {
		if c := cur().cmd; c != nil {
			return c.Subcommands
		}
		return app.Commands
	}
	flagsOf := func() []cli.Flag {
		if c := cur().cmd; c != nil {
			return c.Flags
		}
		return app.Flags
	}

	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			positionals = append(positionals, rest[i+1:]...)
			i = len(rest)
		case len(a) > 1 && a[0] == '-':
			name, hasValue := flagName(a)
			dest := cur()
			f := findFlag(flagsOf(), name)
			if f == nil && len(levels) > 1 {
				if g := findFlag(app.Flags, name); g != nil {
					f, dest = g, &levels[0]
				}
			}
			dest.flags = append(dest.flags, a)
			if !hasValue && takesValue(f) && i+1 < len(rest) {
				i++
				dest.flags = append(dest.flags, rest[i])
			}
		default:
			if len(positionals) == 0 {
				if a == "help" && findCommand(subs(), a) == nil {
					// "ralph help task add" and "ralph task help add"
					// mean "ralph task add --help".
					again := append([]string{}, args[:i+1]...)
					again = append(again, rest[i+1:]...)
					return reorderArgs(app, append(again, "--help"))
				}
				if sub := findCommand(subs(), a); sub != nil {
					levels = append(levels, level{name: a, cmd: sub})
					continue
				}
			}
			positionals = append(positionals, a)
		}
	}

	out := make([]string, 0, len(args)+1)
	out = append(out, args[0])
	for _, l := range levels {
		if l.name != "" {
			out = append(out, l.name)
		}
		out = append(out, l.flags...)
	}
	if len(positionals) > 0 {
		out = append(out, "--")
		out = append(out, positionals...)
	}
	return out
}

// flagName returns the name of "-x", "--name" or "--name=value" and whether
// the value is attached.
func flagName(arg string) (name string, hasValue bool) {
	name = strings.TrimLeft(arg, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		return name[:i], true
	}
	return name, false
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// takesValue reports whether f consumes the next argument. Unknown flags
// (nil) and cli's own --help/--version are booleans.
func takesValue(f cli.Flag) bool {
	if f == nil {
		return false
	}
	if v, ok := f.(interface{ TakesValue() bool }); ok {
		return v.TakesValue()
	}
	return false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
