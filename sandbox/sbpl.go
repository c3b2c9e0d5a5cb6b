package sandbox

import (
	"regexp"
	"strings"
)

// profileSpec is what a macOS session may write, for profile.
type profileSpec struct {
	// tree is the tree the session writes; writable are the other
	// directories it writes: its temp directory.
	tree     string
	writable []string
	// plan is the plan's .ralph/, which it does not write, but for a
	// tree in it (a worker's, in .ralph/worktrees).
	plan string
	// readOnly are directories and files in them it does not write after
	// all, even in its tree: the repository's git directories and the
	// tree's .git.
	readOnly []string
	// states are the agent's state directories: only their kept entries
	// and fresh patterns are writable.
	states []stateMount
	// hide are files it neither reads nor writes.
	hide []string
}

// profile is the sandbox-exec profile (SBPL) that lets a process read
// everything but the hidden files, do everything else it could do
// unsandboxed (network, exec, signals), and write only the writable
// directories, the kept and fresh entries of its state directories, and
// what every process writes: the null and terminal devices, its own file
// descriptors, and the per-user temporary and cache directories under
// /private/var/folders (each owned by its user, mode 0700), which the
// system frameworks use whatever TMPDIR says. In SBPL the last rule that
// matches wins: the plan is denied after the writable paths are allowed,
// a worker's tree in the plan allowed again after that, and the git
// directories and the tree's .git denied last. Paths are already
// resolved: the kernel checks the real path (/private/tmp, not /tmp).
func profile(p profileSpec) string {
	var b strings.Builder
	b.WriteString("(version 1)\n(allow default)\n(deny file-write*)\n(allow file-write*\n")
	b.WriteString("    (subpath " + sbplString(p.tree) + ")\n")
	for _, w := range p.writable {
		b.WriteString("    (subpath " + sbplString(w) + ")\n")
	}
	for _, st := range p.states {
		for _, k := range st.keep {
			b.WriteString("    (literal " + sbplString(st.dir+"/"+k) + ")\n")
		}
		for _, f := range st.fresh {
			if re, ok := sbplRegex("^" + regexp.QuoteMeta(st.dir+"/") + globRegex(f) + "(/|$)"); ok {
				b.WriteString("    (regex " + re + ")\n")
			}
		}
	}
	b.WriteString(`    (literal "/dev/null")
    (literal "/dev/zero")
    (literal "/dev/tty")
    (literal "/dev/dtracehelper")
    (literal "/dev/stdout")
    (literal "/dev/stderr")
    (regex #"^/dev/fd/[0-9]+$")
    (regex #"^/dev/ttys[0-9]+$")
    (subpath "/private/var/folders"))
`)
	if p.plan != "" {
		b.WriteString("(deny file-write* (subpath " + sbplString(p.plan) + "))\n")
		if within(p.tree, p.plan) {
			b.WriteString("(allow file-write* (subpath " + sbplString(p.tree) + "))\n")
		}
	}
	if len(p.readOnly) > 0 {
		b.WriteString("(deny file-write*\n")
		for _, r := range p.readOnly {
			b.WriteString("    (subpath " + sbplString(r) + ")\n")
		}
		b.WriteString(")\n")
	}
	if len(p.hide) > 0 {
		b.WriteString("(deny file-read* file-write*\n")
		for _, h := range p.hide {
			b.WriteString("    (literal " + sbplString(h) + ")\n")
		}
		b.WriteString(")\n")
	}
	return b.String()
}

// globRegex turns a path.Match pattern of one name into a regular
// expression: * and ? match within the name, everything else is itself.
func globRegex(pat string) string {
	var b strings.Builder
	for _, r := range pat {
		switch r {
		case '*':
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	return b.String()
}

// sbplString quotes s as an SBPL string literal.
func sbplString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// sbplRegex writes re as an SBPL regular expression literal, #"re", whose
// backslashes are the expression's own. A double quote cannot be written
// in one: ok is false then, and the rule is left out (a fresh entry of
// such a directory is not writable).
func sbplRegex(re string) (string, bool) {
	if strings.Contains(re, `"`) {
		return "", false
	}
	return `#"` + re + `"`, true
}
