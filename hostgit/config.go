package hostgit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// dropped are the variables of ralph's own environment that Command does
// not pass on: those that would send git to another repository, index,
// object store or work tree (Command sets GIT_DIR, GIT_COMMON_DIR and
// GIT_WORK_TREE itself), change how pathspecs, replace refs or attributes
// are read, or that Command sets to values of its own.
var dropped = []string{
	"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE",
	"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
	"GIT_NAMESPACE", "GIT_PREFIX", "GIT_QUARANTINE_PATH",
	"GIT_IMPLICIT_WORK_TREE", "GIT_INTERNAL_SUPER_PREFIX",
	"GIT_SHALLOW_FILE", "GIT_GRAFT_FILE", "GIT_REPLACE_REF_BASE",
	"GIT_NO_REPLACE_OBJECTS", "GIT_ATTR_SOURCE", "GIT_CONFIG",
	"GIT_LITERAL_PATHSPECS", "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS",
	"GIT_ICASE_PATHSPECS", "GIT_OPTIONAL_LOCKS", "GIT_TERMINAL_PROMPT",
	"GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "LC_ALL",
}

// cleanEnv is env without the dropped variables and with PATH's
// relative entries left out, and with those that keep git from asking
// anything of a person (no terminal prompt, an editor that accepts what
// it is given) and its messages in English.
func cleanEnv(env []string) []string {
	out := make([]string, 0, len(env)+8)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH":
			out = append(out, "PATH="+absolutePath(kv[len("PATH="):]))
		case !slices.Contains(dropped, k):
			out = append(out, kv)
		}
	}
	return append(out, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_EDITOR=true", "GIT_SEQUENCE_EDITOR=true")
}

// absolutePath is a PATH value without its relative entries (and empty
// ones, which mean the current directory): git runs in a directory of
// the agent's tree, so a relative entry would find the programs git runs
// by name (ssh, gpg, a global filter's command, git-remote-<helper>) in
// files the agent wrote.
func absolutePath(path string) string {
	var keep []string
	for _, d := range filepath.SplitList(path) {
		if filepath.IsAbs(d) {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// lookPath finds the executable name as exec.LookPath does, but only in
// the absolute entries of PATH; a name with a slash is taken as it is.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	for _, d := range filepath.SplitList(absolutePath(os.Getenv("PATH"))) {
		if p, err := exec.LookPath(filepath.Join(d, name)); err == nil {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// Env is the environment Command gives git: ralph's own, cleaned; the
// repository's directories; and the configuration that blanks every
// program the repository's own configuration names (see the package
// doc), as GIT_CONFIG_COUNT entries after any the environment has.
func (r *Repo) Env(ctx context.Context) ([]string, error) {
	env, _, err := r.env(ctx)
	return env, err
}

func (r *Repo) env(ctx context.Context) ([]string, overrides, error) {
	env := append(cleanEnv(os.Environ()), "GIT_DIR="+r.GitDir, "GIT_COMMON_DIR="+r.CommonDir, "GIT_WORK_TREE="+r.WorkTree)
	ov, err := r.overrides(ctx, env)
	if err != nil {
		return nil, ov, err
	}
	n := 0
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "GIT_CONFIG_COUNT="); ok {
			if c, err := strconv.Atoi(v); err == nil && c > 0 {
				n = c
			}
			env = slices.Delete(env, i, i+1)
			break
		}
	}
	for i, p := range ov.pins {
		env = append(env, "GIT_CONFIG_KEY_"+strconv.Itoa(n+i)+"="+p.key, "GIT_CONFIG_VALUE_"+strconv.Itoa(n+i)+"="+p.value)
	}
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(n+len(ov.pins)))
	return append(env, ov.env...), ov, nil
}

// packPrograms inserts --upload-pack or --receive-pack after the
// subcommand of args when it talks to a remote whose program the
// repository names.
func packPrograms(args []string, ov overrides) []string {
	i := subcommandIndex(args)
	if i < 0 {
		return args
	}
	var programs map[string]string
	var opt string
	switch args[i] {
	case "fetch", "ls-remote", "pull":
		programs, opt = ov.uploadPack, "--upload-pack="
	case "push":
		programs, opt = ov.receivePack, "--receive-pack="
	default:
		return args
	}
	if len(programs) == 0 {
		return args
	}
	remote := ""
	for j := i + 1; j < len(args); j++ {
		if args[j] == "--" {
			if j+1 < len(args) {
				remote = args[j+1]
			}
			break
		}
		if !strings.HasPrefix(args[j], "-") && remote == "" {
			remote = args[j]
		}
	}
	prog, ok := programs[remote]
	if !ok {
		return args
	}
	return slices.Insert(slices.Clone(args), i+1, opt+prog)
}

// A pin is one configuration entry given at command scope.
type pin struct{ key, value string }

// overrides is what blanks the repository's programs: entries at command
// scope and environment variables.
type overrides struct {
	pins []pin
	env  []string
	// blanked are the program-naming keys the repository defines, in
	// the order it does.
	blanked []string
	// uploadPack and receivePack are the programs for the remotes whose
	// remote.<name>.uploadpack or receivepack the repository defines:
	// git takes the first value it reads, so that these are given on
	// the command line (--upload-pack, --receive-pack).
	uploadPack, receivePack map[string]string
}

// configCache keeps a Repo's overrides with the stat data of every file
// the configuration was read from or could be read from, so that a
// command costs a few stat calls, not a git config process, while no such
// file changed.
type configCache struct {
	mu     sync.Mutex
	ok     bool
	racy   bool
	watch  []string
	stamps []stamp
	ov     overrides
	// listings counts the git config processes run (for tests).
	listings int
}

// racyWindow: a file modified this shortly before git read it may have
// been modified again within one tick of its file system's clock, which
// its stat data would not show; such a listing is not trusted twice.
var racyWindow = 2 * time.Second

func (r *Repo) overrides(ctx context.Context, env []string) (overrides, error) {
	c := r.cfg
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && !c.racy && slices.Equal(stamps(c.watch), c.stamps) {
		return c.ov, nil
	}
	bin, err := r.bin()
	if err != nil {
		return overrides{}, err
	}
	began := time.Now()
	cmd := gitCommand(ctx, bin, "--no-pager", "config", "--list", "--show-scope", "--show-origin", "-z")
	cmd.Dir = r.GitDir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	c.listings++
	if err := cmd.Run(); err != nil {
		c.ok = false
		return overrides{}, fmt.Errorf("hostgit: reading the configuration of %s: %w: %s", r.GitDir, err, strings.TrimSpace(stderr.String()))
	}
	entries := parseList(stdout.Bytes())
	c.ov = computeOverrides(entries, env)
	c.watch = r.watchList(entries, env)
	c.stamps = stamps(c.watch)
	c.racy = false
	for _, s := range c.stamps {
		if s.exists && (s.mtime > began.Add(-racyWindow).UnixNano() || s.ctime > began.Add(-racyWindow).UnixNano()) {
			c.racy = true
		}
	}
	c.ok = true
	return c.ov, nil
}

// Listings is how many times the configuration was read with git config
// (a test hook: the common case reads it once).
func (r *Repo) Listings() int {
	r.cfg.mu.Lock()
	defer r.cfg.mu.Unlock()
	return r.cfg.listings
}

// An entry is one line of git config --list --show-scope --show-origin.
type entry struct {
	scope, origin, key, value string
}

// parseList reads -z output: scope NUL origin NUL key[LF value] NUL.
func parseList(out []byte) []entry {
	f := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	var es []entry
	for i := 0; i+2 < len(f); i += 3 {
		k, v, _ := strings.Cut(f[i+2], "\n")
		es = append(es, entry{scope: f[i], origin: f[i+1], key: k, value: v})
	}
	return es
}

// trusted scopes: the user's own configuration (system and global files,
// and -c or GIT_CONFIG_* of ralph's own environment). Everything else —
// local, worktree, and what their include.path and includeIf bring in,
// which git lists under the including file's scope — is the
// repository's.
func trusted(scope string) bool {
	return scope == "system" || scope == "global" || scope == "command"
}

// splitKey splits a key into section, subsection and name (git lowers the
// case of section and name, not of the subsection).
func splitKey(key string) (section, sub, name string) {
	i, j := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
	if i < 0 {
		return key, "", ""
	}
	if i == j {
		return key[:i], "", key[i+1:]
	}
	return key[:i], key[i+1 : j], key[j+1:]
}

// alternateRefs is what core.alternateRefsCommand does when unset (git
// for-each-ref in the alternate), for a repository that set one.
const alternateRefs = `f() { unset GIT_DIR GIT_COMMON_DIR GIT_WORK_TREE GIT_INDEX_FILE; git --git-dir="$1" for-each-ref --format="%(objectname)" %s; }; f`

// computeOverrides blanks what the repository's configuration could make
// git run. Keys every command pins whatever the configuration says come
// first; then each program-naming key the repository defines is set to
// what the user's own configuration says, or to a value that runs
// nothing; then the credential helpers are reset and the user's put back.
func computeOverrides(es []entry, env []string) overrides {
	last := func(keys ...string) (string, bool) {
		for i := len(es) - 1; i >= 0; i-- {
			if trusted(es[i].scope) && slices.Contains(keys, es[i].key) {
				return es[i].value, true
			}
		}
		return "", false
	}
	or := func(def string, keys ...string) string {
		if v, ok := last(keys...); ok {
			return v
		}
		return def
	}
	getenv := func(k string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], k+"="); ok {
				return v, true
			}
		}
		return "", false
	}
	var ov overrides
	add := func(k, v string) { ov.pins = append(ov.pins, pin{k, v}) }

	// Always: hooks from the user's hooksPath or none; no fsmonitor, no
	// recursion into submodules (whose own configuration this never
	// read), no ext:: transport; the signing programs the user's or git's.
	hooks, relativeHooks := or("/dev/null", "core.hookspath"), false
	if !absoluteHooks(hooks, env) {
		// A relative hooksPath (the user's ~/.gitconfig saying
		// ".githooks") is found in the tree git runs in: the agent's.
		hooks = "/dev/null"
		relativeHooks = true
	}
	add("core.hooksPath", hooks)
	add("core.fsmonitor", "false")
	add("submodule.recurse", "false")
	add("protocol.ext.allow", "never")
	// No housekeeping after ralph's commands (git maintenance run
	// --auto, git gc --auto): it would run git again with only the
	// command-scope entries, and the user's next git command does it.
	add("maintenance.auto", "false")
	askpass, _ := getenv("SSH_ASKPASS")
	add("core.askPass", or(askpass, "core.askpass"))
	add("gpg.program", or("gpg", "gpg.program", "gpg.openpgp.program"))
	add("gpg.openpgp.program", or("gpg", "gpg.program", "gpg.openpgp.program"))
	add("gpg.x509.program", or("gpgsm", "gpg.x509.program"))
	add("gpg.ssh.program", or("ssh-keygen", "gpg.ssh.program"))
	if _, ok := getenv("GIT_SSH_COMMAND"); !ok {
		ssh := "ssh"
		if v, ok := last("core.sshcommand"); ok {
			ssh = v
		} else if v, ok := getenv("GIT_SSH"); ok && v != "" {
			ssh = shellQuote(v)
		}
		ov.env = append(ov.env, "GIT_SSH_COMMAND="+ssh)
	}

	// What the repository defines.
	seen := map[string]bool{}
	for _, e := range es {
		if trusted(e.scope) || seen[e.key] {
			continue
		}
		seen[e.key] = true
		section, sub, name := splitKey(e.key)
		if programKey(e.key) {
			ov.blanked = append(ov.blanked, e.key)
		}
		switch {
		case section == "filter" && sub != "" && (name == "clean" || name == "smudge" || name == "process"):
			add(e.key, or("", e.key)) // "": no filter
		case section == "filter" && sub != "" && name == "required":
			add(e.key, or("false", e.key))
		case section == "diff" && sub != "" && (name == "textconv" || name == "command"):
			add(e.key, or("", e.key))
		case e.key == "diff.external":
			add(e.key, or("", e.key))
		case section == "merge" && sub != "" && name == "driver":
			add(e.key, or("exit 1", e.key)) // a conflict
		case section == "remote" && sub != "" && name == "uploadpack":
			if ov.uploadPack == nil {
				ov.uploadPack = map[string]string{}
			}
			ov.uploadPack[sub] = or("git-upload-pack", e.key)
		case section == "remote" && sub != "" && name == "receivepack":
			if ov.receivePack == nil {
				ov.receivePack = map[string]string{}
			}
			ov.receivePack[sub] = or("git-receive-pack", e.key)
		case section == "remote" && sub != "" && name == "vcs":
			add(e.key, or("", e.key))
		case e.key == "core.alternaterefscommand":
			prefixes, _ := last("core.alternaterefsprefixes")
			add(e.key, or(strings.Replace(alternateRefs, "%s", prefixes, 1), e.key))
		case e.key == "gpg.ssh.defaultkeycommand":
			add(e.key, or("", e.key))
		case section == "hook" && sub != "" && name == "command":
			// Configured hooks (git 2.46 and later; 2.39 ignores them).
			add(e.key, or("exit 0", e.key))
		case e.key == "core.gitproxy":
			// First match wins and -c comes last: only the variable,
			// which replaces every entry, can take it over. "" is no
			// proxy.
			if _, ok := getenv("GIT_PROXY_COMMAND"); !ok {
				ov.env = append(ov.env, "GIT_PROXY_COMMAND=")
			}
		}
	}

	if relativeHooks && !slices.Contains(ov.blanked, "core.hookspath") {
		ov.blanked = append(ov.blanked, "core.hookspath")
	}

	// Credential helpers add up across scopes; an empty value empties
	// the list. The user's are put back in their order.
	add("credential.helper", "")
	for _, e := range es {
		if section, _, name := splitKey(e.key); trusted(e.scope) && section == "credential" && name == "helper" {
			add(e.key, e.value)
		}
	}
	return ov
}

// absoluteHooks reports whether a core.hooksPath value of the user's
// names a directory whatever the directory git runs in: an absolute path,
// or one git makes absolute ("~/", "~user/" with an absolute home, or
// "%(prefix)/", git's own installation).
func absoluteHooks(v string, env []string) bool {
	switch {
	case filepath.IsAbs(v), strings.HasPrefix(v, "%(prefix)/"):
		return true
	case v == "~" || strings.HasPrefix(v, "~/"):
		home := ""
		for i := len(env) - 1; i >= 0; i-- {
			if h, ok := strings.CutPrefix(env[i], "HOME="); ok {
				home = h
				break
			}
		}
		return filepath.IsAbs(home)
	case strings.HasPrefix(v, "~"):
		name, _, _ := strings.Cut(v[1:], "/")
		u, err := user.Lookup(name)
		return err == nil && filepath.IsAbs(u.HomeDir)
	}
	return false
}

// programKey reports whether key names a program (or where hooks are).
func programKey(key string) bool {
	section, sub, name := splitKey(key)
	switch {
	case section == "filter" && sub != "" && (name == "clean" || name == "smudge" || name == "process"),
		section == "diff" && sub != "" && (name == "textconv" || name == "command"),
		section == "merge" && sub != "" && name == "driver",
		section == "remote" && sub != "" && (name == "uploadpack" || name == "receivepack" || name == "vcs"),
		section == "hook" && sub != "" && name == "command",
		section == "credential" && name == "helper":
		return true
	}
	switch key {
	case "core.hookspath", "core.fsmonitor", "core.sshcommand", "core.askpass", "core.gitproxy",
		"core.alternaterefscommand", "diff.external", "gpg.program", "gpg.openpgp.program",
		"gpg.x509.program", "gpg.ssh.program", "gpg.ssh.defaultkeycommand", "core.pager", "core.editor",
		"sequence.editor", "core.worktree":
		return true
	}
	return false
}

// Blanked lists the keys of the repository's own configuration (its
// config files and what they include) that name a program ralph's git
// does not run, as git lists them, and core.hookspath when the user's own
// is a relative path (which would name a directory of the agent's tree):
// a run can say that the repository's git-lfs filter, say, is off for
// it.
func (r *Repo) Blanked(ctx context.Context) ([]string, error) {
	_, ov, err := r.env(ctx)
	return slices.Clone(ov.blanked), err
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// watchList is every file whose change could change the overrides: the
// files the configuration came from, the ones git would read if they
// existed (the repository's config and config.worktree files, the user's
// global and system files, every include.path and includeIf target), and
// HEAD when an includeIf depends on the branch.
func (r *Repo) watchList(es []entry, env []string) []string {
	getenv := func(k string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], k+"="); ok {
				return v
			}
		}
		return ""
	}
	home := getenv("HOME")
	files := []string{
		filepath.Join(r.CommonDir, "config"),
		filepath.Join(r.CommonDir, "config.worktree"),
		filepath.Join(r.GitDir, "config.worktree"),
	}
	if g := getenv("GIT_CONFIG_GLOBAL"); g != "" {
		files = append(files, g)
	} else {
		xdg := getenv("XDG_CONFIG_HOME")
		if xdg == "" && home != "" {
			xdg = filepath.Join(home, ".config")
		}
		if xdg != "" {
			files = append(files, filepath.Join(xdg, "git", "config"))
		}
		if home != "" {
			files = append(files, filepath.Join(home, ".gitconfig"))
		}
	}
	if !boolEnv("GIT_CONFIG_NOSYSTEM") {
		if s := getenv("GIT_CONFIG_SYSTEM"); s != "" {
			files = append(files, s)
		} else {
			files = append(files, "/etc/gitconfig")
		}
	}
	for _, e := range es {
		p, ok := strings.CutPrefix(e.origin, "file:")
		if !ok {
			continue
		}
		files = append(files, p)
		if e.key == "include.path" || strings.HasPrefix(e.key, "includeif.") && strings.HasSuffix(e.key, ".path") {
			t := e.value
			switch {
			case strings.HasPrefix(t, "~/") && home != "":
				t = filepath.Join(home, t[2:])
			case !filepath.IsAbs(t):
				t = filepath.Join(filepath.Dir(p), t)
			}
			files = append(files, t)
		}
		if strings.HasPrefix(e.key, "includeif.onbranch:") {
			files = append(files, filepath.Join(r.GitDir, "HEAD"))
		}
	}
	slices.Sort(files)
	return slices.Compact(files)
}

// A stamp is what stat says of a file: enough to tell that it changed.
type stamp struct {
	exists         bool
	dev, ino, size uint64
	mode           uint32
	mtime, ctime   int64
}

func stamps(files []string) []stamp {
	out := make([]stamp, len(files))
	for i, f := range files {
		out[i] = statStamp(f)
	}
	return out
}
