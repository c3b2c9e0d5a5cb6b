package sandbox

// mount is one bubblewrap mount: op ("--bind", "--ro-bind") of src (a
// path of the host, as it is outside the sandbox) at dst (a path inside,
// where earlier mounts are already in place).
type mount struct {
	op, src, dst string
}

// bind and roBind are a writable and a read-only bind mount.
func bind(src, dst string) mount   { return mount{"--bind", src, dst} }
func roBind(src, dst string) mount { return mount{"--ro-bind", src, dst} }

// bwrapCommand is the pure part of the Linux session: the argument vector
// for bubblewrap at bwrap. sigEnv is a GNU env that knows --ignore-signal
// and --default-signal ("" when there is none: the agent then cannot be
// stopped gracefully, see the package doc); root says ralph runs as root
// (bubblewrap then keeps capabilities unless told otherwise); mounts come
// after the read-only root, in order.
func bwrapCommand(bwrap, sigEnv string, root bool, dir string, mounts []mount, path string, args []string) (string, []string) {
	a := []string{
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--perms", "1777", "--tmpfs", "/dev/shm",
		"--proc", "/proc",
		"--unshare-pid",
		"--unshare-ipc",
		"--die-with-parent",
		"--cap-drop", "ALL",
	}
	if root {
		// Root keeps the right to write files of other users where the
		// sandbox lets it write at all, but nothing that reaches past a
		// mount: no CAP_SYS_ADMIN (remount / read-write), no
		// CAP_DAC_READ_SEARCH (open_by_handle_at through a writable bind
		// of the same file system).
		for _, c := range rootCaps {
			a = append(a, "--cap-add", c)
		}
	}
	for _, m := range mounts {
		a = append(a, m.op, m.src, m.dst)
	}
	if dir != "" {
		a = append(a, "--chdir", dir)
	}
	a = append(a, "--")
	if sigEnv == "" {
		return bwrap, append(append(a, path), args...)
	}
	a = append(a, sigEnv, "--default-signal=TERM", path)
	return sigEnv, append(append([]string{"--ignore-signal=TERM", bwrap}, a...), args...)
}

// rootCaps are the capabilities root keeps inside the sandbox: those that
// bypass file permissions, none that bypass mounts.
var rootCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID"}
