package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/notify"
	"github.com/ralph-dev/ralph/safefile"
)

// handEnv are the variables that give a flag its value where the command
// reads them itself rather than through the flag (chooseAgent).
var handEnv = map[string]string{"agent-cli": envAgentCLI}

// configName is the project's configuration file, in .ralph/.
const configName = "config.toml"

// configCommands are the commands whose flags the configuration file
// gives defaults, one table each ([build], [plan], [prompt]).
var configCommands = []string{"build", "plan", "prompt"}

// settings says where each flag of a command got its value: "--name" on
// the command line, "$VAR" from the environment, the configuration file,
// or "default".
type settings struct {
	from map[string]string
}

// source is where flag name's value came from.
func (s *settings) source(name string) string {
	if src, ok := s.from[name]; ok {
		return src
	}
	return "default"
}

// applyConfig gives the flags of command c that neither the command line
// nor the environment set the values of its table in the project's
// .ralph/config.toml, and says where each flag's value came from. The
// file is read once, here, before anything runs, from the project's
// .ralph/ only (never from a worker's tree), without following a link: it
// is the user's, like the plan, and under --sandbox no agent can write
// it. No file is no defaults. A file that does not parse, a table or key
// that is no command or flag, a value of the wrong type: a usage error
// naming the file, the key and, where one is near, the flag meant.
func applyConfig(c *cli.Context, cfg appConfig, p project) (*settings, error) {
	s := flagSources(c, cfg)
	table, shown, err := readConfig(c, p)
	if err != nil || table == nil {
		return s, err
	}
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		f := commandFlag(c.Command, key)
		if f == nil {
			return nil, &usageError{cmd: "ralph " + c.Command.Name, err: fmt.Errorf("%s: [%s] %s: ralph %s has no flag --%s%s",
				shown, c.Command.Name, key, c.Command.Name, key, didYouMean(nearest(key, flagNames(c.Command.Flags)), "%s"))}
		}
		values, err := configValues(f, table[key])
		if err != nil {
			return nil, &usageError{cmd: "ralph " + c.Command.Name, err: fmt.Errorf("%s: [%s] %s: %v", shown, c.Command.Name, key, err)}
		}
		if _, set := s.from[key]; set {
			continue // the command line or the environment wins
		}
		for _, v := range values {
			if err := c.Set(key, v); err != nil {
				return nil, &usageError{cmd: "ralph " + c.Command.Name, err: fmt.Errorf("%s: [%s] %s = %q: %v", shown, c.Command.Name, key, v, err)}
			}
		}
		s.from[key] = shown
	}
	return s, nil
}

// flagSources says which flags of c the command line or the environment
// set (applyConfig).
func flagSources(c *cli.Context, cfg appConfig) *settings {
	s := &settings{from: map[string]string{}}
	args, known := commandLine(c)
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		switch {
		case !c.IsSet(name):
		case !known || onCommandLine(args, f.Names()):
			s.from[name] = "--" + name
		default:
			// Set, not on the command line: by a variable, unless it is
			// empty (then the file may still give the flag a value).
			if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
				for _, v := range ev.GetEnvVars() {
					if cfg.getenv(v) != "" {
						s.from[name] = "$" + v
						break
					}
				}
			}
		}
		// A variable ralph reads itself, past the flag, wins over the
		// file too.
		if v, ok := handEnv[name]; ok && s.from[name] == "" && cfg.getenv(v) != "" {
			s.from[name] = "$" + v
		}
	}
	return s
}

// readConfig reads the project's config file and returns the table of c's
// command (nil: no file, or no table for it) and the file's name as shown
// to people, or the usage error of a file ralph cannot take.
func readConfig(c *cli.Context, p project) (table map[string]any, shown string, err error) {
	path := filepath.Join(p.ralph, configName)
	shown = p.rel(path)
	data, err := safefile.ReadFile(p.root, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, shown, nil
	case errors.Is(err, safefile.ErrLink):
		return nil, shown, fmt.Errorf("%s: %w: ralph reads its configuration only from a file of the project's own, not through a link", shown, err)
	case err != nil:
		return nil, shown, fmt.Errorf("%s: %w", shown, err)
	}
	var tables map[string]map[string]any
	md, err := toml.Decode(string(data), &tables)
	if err != nil {
		return nil, shown, &usageError{cmd: "ralph " + c.Command.Name, err: fmt.Errorf("%s: %v", shown, err)}
	}
	for _, key := range md.Keys() {
		if len(key) == 1 && md.Type(key[0]) != "Hash" {
			return nil, shown, &usageError{cmd: "ralph " + c.Command.Name, err: fmt.Errorf("%s: %q is no table: the keys go in %s", shown, key[0], strings.Join(tableNames(), ", "))}
		}
	}
	for name := range tables {
		if !slices.Contains(configCommands, name) {
			return nil, shown, &usageError{cmd: "ralph " + c.Command.Name, err: fmt.Errorf("%s: [%s] is no table ralph reads: want %s%s",
				shown, name, strings.Join(tableNames(), ", "), didYouMean(nearest(name, configCommands), "[%s]"))}
		}
	}
	return tables[c.Command.Name], shown, nil
}

func tableNames() []string {
	var out []string
	for _, n := range configCommands {
		out = append(out, "["+n+"]")
	}
	return out
}

// didYouMean is "; did you mean X?" for a suggestion, "" for none.
func didYouMean(s, format string) string {
	if s == "" {
		return ""
	}
	return "; did you mean " + fmt.Sprintf(format, s) + "?"
}

// commandLine is the arguments the app was run with (runApp keeps them);
// known false when it did not.
func commandLine(c *cli.Context) (args []string, known bool) {
	args, known = c.App.Metadata[metaArgs].([]string)
	return args, known
}

// onCommandLine reports whether one of names was given as a flag in args.
func onCommandLine(args, names []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		for _, n := range names {
			d := dashed(n)
			if a == d || strings.HasPrefix(a, d+"=") || (len(n) > 1 && (a == "-"+n || strings.HasPrefix(a, "-"+n+"="))) {
				return true
			}
		}
	}
	return false
}

// commandFlag is cmd's flag called name, nil when it has none.
func commandFlag(cmd *cli.Command, name string) cli.Flag {
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) && name != "help" {
			return f
		}
	}
	return nil
}

// configValues is v, a TOML value, as the text f takes on the command
// line (one entry a value; several for a repeatable flag), or an error
// saying what f wants.
func configValues(f cli.Flag, v any) ([]string, error) {
	switch f.(type) {
	case *cli.BoolFlag:
		if b, ok := v.(bool); ok {
			return []string{strconv.FormatBool(b)}, nil
		}
		return nil, fmt.Errorf("want true or false, not %s", tomlType(v))
	case *cli.IntFlag:
		if n, ok := v.(int64); ok {
			return []string{strconv.FormatInt(n, 10)}, nil
		}
		return nil, fmt.Errorf("want a whole number, not %s", tomlType(v))
	case *cli.Float64Flag:
		switch n := v.(type) {
		case int64:
			return []string{strconv.FormatInt(n, 10)}, nil
		case float64:
			return []string{strconv.FormatFloat(n, 'f', -1, 64)}, nil
		}
		return nil, fmt.Errorf("want a number, not %s", tomlType(v))
	case *cli.DurationFlag:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want a duration in quotes, such as \"30m\", not %s", tomlType(v))
		}
		if _, err := time.ParseDuration(s); err != nil {
			return nil, fmt.Errorf("%q: %s", s, durationHint(s))
		}
		return []string{s}, nil
	case *cli.StringSliceFlag:
		switch l := v.(type) {
		case string:
			return []string{l}, nil
		case []any:
			var out []string
			for _, e := range l {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("want a list of strings, not a list holding %s", tomlType(e))
				}
				out = append(out, s)
			}
			return out, nil
		}
		return nil, fmt.Errorf("want a string or a list of strings, not %s", tomlType(v))
	case *cli.StringFlag:
		if s, ok := v.(string); ok {
			return []string{s}, nil
		}
		return nil, fmt.Errorf("want a string in quotes, not %s", tomlType(v))
	}
	return nil, fmt.Errorf("this flag cannot be set in the file")
}

// tomlType names the TOML type of a decoded value.
func tomlType(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case int64:
		return "a whole number"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "a table"
	}
	return "a date or time"
}

// dryRunSettings are the settings `build --dry-run` always shows, in
// order; any other flag is shown when it is not at its default.
var dryRunSettings = []string{"agent-cli", "model", "strategy", "workers", "max-iterations", "test-cmd", "final-cmd",
	"verify", "notify", "max-cost", "max-retries", "timeout", "on-usage-limit", "max-wait"}

// printSettings writes the effective settings of the build c runs and
// where each came from (DESIGN §15): after the dry run's other lines.
func printSettings(c *cli.Context, cfg appConfig, s *settings) {
	w := cfg.stdout
	fmt.Fprintln(w, "settings:")
	shown := map[string]bool{"dry-run": true, "help": true}
	show := func(name string) {
		if shown[name] {
			return
		}
		shown[name] = true
		value := settingValue(c, name)
		if v, ok := handEnv[name]; ok && c.String(name) == "" {
			value = strconv.Quote(cmp.Or(cfg.getenv(v), "claude"))
		}
		fmt.Fprintf(w, "  %s = %s (%s)\n", name, value, s.source(name))
	}
	for _, name := range dryRunSettings {
		show(name)
	}
	for _, f := range c.Command.Flags {
		if name := f.Names()[0]; s.source(name) != "default" {
			show(name)
		}
	}
}

// settingValue is flag name's value as a person reads it: a list for a
// repeatable flag, URLs with their secrets masked, "" quoted.
func settingValue(c *cli.Context, name string) string {
	f := commandFlag(c.Command, name)
	switch f.(type) {
	case *cli.StringSliceFlag:
		vs := []string{}
		for _, v := range c.StringSlice(name) {
			if v != "" {
				vs = append(vs, strconv.Quote(notify.Mask(v)))
			}
		}
		return "[" + strings.Join(vs, ", ") + "]"
	case *cli.StringFlag:
		return strconv.Quote(c.String(name))
	case *cli.BoolFlag:
		return strconv.FormatBool(c.Bool(name))
	case *cli.IntFlag:
		return strconv.Itoa(c.Int(name))
	case *cli.Float64Flag:
		return strconv.FormatFloat(c.Float64(name), 'f', -1, 64)
	case *cli.DurationFlag:
		return c.Duration(name).String()
	}
	return fmt.Sprint(c.Value(name))
}
