package sandbox

import "strings"

// profile is the sandbox-exec profile (SBPL) that lets a process read
// everything, do everything else it could do unsandboxed (network, exec,
// signals), and write only the granted paths plus what every process
// writes: the null and terminal devices, its own file descriptors, and
// the per-user temporary and cache directories under /private/var/folders
// (each owned by its user, mode 0700), which the system frameworks use
// whatever TMPDIR says. Paths are already resolved: the kernel checks the
// real path (/private/tmp, not /tmp).
func profile(gs []grant) string {
	var b strings.Builder
	b.WriteString("(version 1)\n(allow default)\n(deny file-write*)\n(allow file-write*\n")
	for _, g := range gs {
		if g.dir {
			b.WriteString("    (subpath " + sbplString(g.path) + ")\n")
		} else {
			b.WriteString("    (literal " + sbplString(g.path) + ")\n")
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
	return b.String()
}

// sbplString quotes s as an SBPL string literal.
func sbplString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
