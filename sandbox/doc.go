// Package sandbox runs an agent so that it can write only where it is
// allowed: the project or its worktree, the plan's .ralph/, the
// repository's git directories, the agent's own state directories and the
// temp directory (DESIGN.md §11, `--sandbox`). It reads everything,
// reaches the network and runs any program as before.
//
// Find locates the tool (bwrap on Linux, sandbox-exec on macOS; anywhere
// else it returns ErrUnavailable); Sandbox.Command turns the agent's
// command into the sandboxed one for a Policy; Dirs lists the paths every
// agent needs writable. The agent's own state (~/.codex, ~/.gemini, …) is
// added by its runner (StateDirs), because only the runner knows it.
// The package uses the standard library only.
//
// # What is writable, and why
//
// Dirs gives the working directory; the git directory and the common git
// directory (a worktree's commits write objects and refs into the main
// repository's .git, and its index and HEAD into .git/worktrees/NAME);
// $RALPH_DIR/.ralph, where the agent's own `ralph task …` calls write the
// plan and logs (in a parallel build the main checkout itself stays
// read-only: the agent works in its worktree); $RALPH_WORKTREE; and the
// temp directory ($TMPDIR, else os.TempDir()). The git directories are
// found by reading .git files and commondir as git does, not by running
// git (see Dirs); the tests compare the result with `git rev-parse` in a
// checkout, a worktree and a submodule.
//
// Paths are resolved before they are granted: bubblewrap mounts and the
// macOS kernel check the real path, so a project reached through a
// symbolic link gets its target writable, and the link (on the read-only
// root) still leads there. A path that does not exist is skipped — the
// agent cannot create it, so the caller creates the state directories
// before the run: with a fresh HOME and none of them, the pinned OpenCode
// stops at once (EROFS on mkdir ~/.local) and Gemini CLI complains on
// every start; with them made, all four pinned CLIs start in the sandbox.
// A writable file is writable in place only: a program that replaces it by
// writing a temporary file beside it and renaming it needs the directory.
// Paths inside another writable directory are dropped (the directory
// covers them); the rest are mounted in sorted order, parents first.
//
// When TMPDIR names a directory of its own, /tmp itself is read-only: a
// tool that writes to /tmp ignoring TMPDIR fails. Without TMPDIR the temp
// directory is /tmp, and all of it is writable.
//
// # Linux: bubblewrap
//
// The command is
//
//	env --ignore-signal=TERM bwrap --ro-bind / / --dev /dev --perms 1777 --tmpfs /dev/shm
//	    --proc /proc --unshare-pid --unshare-ipc --die-with-parent --cap-drop ALL
//	    [--cap-add CAP_CHOWN,CAP_DAC_OVERRIDE,CAP_FOWNER,CAP_FSETID when root]
//	    --bind P P … --chdir DIR -- env --default-signal=TERM AGENT ARGS…
//
// The root file system is bound read-only, then each writable path is
// bound read-write over it. /dev is a minimal new one (null, zero, random,
// tty, pts, …), so no host device is writable; /dev/shm is a private
// tmpfs, mode 1777 like the host's so POSIX shared memory and semaphores
// work for any user, gone when the sandbox ends. /proc is a new procfs of
// the sandbox's pid namespace.
//
// Capabilities are dropped. As root, bubblewrap keeps every capability
// unless told otherwise, and an agent could `mount -o remount,rw /` and
// write anywhere (checked: it could, until --cap-drop ALL). Root keeps
// only those that bypass file permissions (chown, DAC override, owner
// checks, set-id bits), so it can still write files of other users in the
// project as it could outside; none that bypass a mount: no
// CAP_SYS_ADMIN, and no CAP_DAC_READ_SEARCH, whose open_by_handle_at can
// open any file of a file system through a writable bind of it. Bubblewrap
// sets the no-root secure bits, so executing a program as uid 0 does not
// give capabilities back. Not being root, bubblewrap runs in a new user
// namespace; Find checks that this works here (kernel setting, AppArmor
// on Ubuntu 24.04) by running a command in the sandbox, so a bubblewrap
// that cannot work fails Find with what to change, not the first agent.
//
// A new pid namespace (--unshare-pid): bubblewrap's init is its pid 1 and
// the agent its pid 2. When the agent exits, the init exits with the
// agent's status and the kernel kills everything left in the namespace,
// including processes that left the agent's process group or session
// (setsid, nohup, daemons) or ignore SIGTERM: nothing the agent started
// outlives it. That happens as bubblewrap exits, not before: bubblewrap
// learns the agent's status from its init before the init is gone, so a
// process of the sandbox can still be dying for a moment after bubblewrap
// has exited (the caller's reaping waits for it). --die-with-parent gives the init a parent-death SIGKILL,
// so a bubblewrap that is killed — by ralph after the grace period, or by
// the kernel when ralph dies — takes the whole sandbox with it. This
// complements the caller's reaping (agentproc) rather than replacing it:
// bubblewrap sets the parent-death signal a moment after it forks (its
// issue 633), so a kill in that instant can leave the init running, which
// the caller's marker sweep finds. A new IPC namespace (--unshare-ipc)
// keeps System V shared memory and POSIX message queues private too.
//
// The exit status passes through: the agent's exit code is bubblewrap's.
// An agent killed by signal N shows as exit code 128+N (bubblewrap's init
// reports it so), not as a signal death of the process ralph started.
//
// Signals. Bubblewrap forwards no signal, and dies of SIGTERM; with
// --die-with-parent its death SIGKILLs the sandbox at once, so the agent
// never gets to handle the SIGTERM ralph sends to its process group before
// escalating. So bwrap is started with SIGTERM ignored (GNU env
// --ignore-signal, an ignored disposition is inherited across exec) and
// the agent with it restored (env --default-signal, inside the sandbox). A
// SIGTERM to the process group — how ralph stops an agent — then reaches
// the agent (and everything it started) while bubblewrap waits for it to
// exit; a SIGTERM sent to bubblewrap's pid alone does nothing, and SIGKILL
// ends everything. The tests check all three. Where env lacks these
// options (busybox, coreutils before 8.31), bwrap is started directly and
// a SIGTERM ends the sandbox at once by SIGKILL. Only SIGTERM is treated
// so: restoring other signals would undo an ignore the agent should
// inherit (nohup's SIGHUP).
//
// No --new-session: it would call setsid inside the sandbox and so put the
// agent in a new process group, out of the one ralph signals to stop it;
// the SIGTERM would then reach only bubblewrap, which ignores it. What it
// guards against is TIOCSTI: a process in ralph's session can open the
// session's controlling terminal (/dev/tty) and push characters into its
// input, which the shell reads once ralph exits — on kernels that still
// allow it (sysctl dev.tty.legacy_tiocsti=1; checked here with a pty).
// The caller closes that by starting the agent in a session of its own
// (SysProcAttr.Setsid instead of Setpgid: the agent is then still the
// leader of its own process group, and has no controlling terminal), or
// by running ralph without a terminal.
//
// The network is kept (no --unshare-net): agents talk to their model's
// API, and tests to local servers. The hostname, users and groups are the
// host's.
//
// # macOS: sandbox-exec
//
// Command writes a profile for the run to a temporary file (cleanup
// removes it) and returns `sandbox-exec -f PROFILE AGENT ARGS…`:
//
//	(version 1)
//	(allow default)
//	(deny file-write*)
//	(allow file-write* (subpath "DIR") (literal "FILE") …
//	    /dev/null, /dev/zero, /dev/tty, /dev/dtracehelper, /dev/stdout,
//	    /dev/stderr, /dev/fd/N, /dev/ttysN, /private/var/folders)
//
// /private/var/folders holds each user's temporary and cache directories
// (mode 0700, owned by their user), which the system frameworks write
// whatever TMPDIR says. sandbox-exec applies the profile to itself and
// executes the agent, which keeps its pid: signals and the exit status
// reach it directly, and the caller's process-group handling is all there
// is. sandbox-exec is deprecated by Apple but still ships with macOS; the
// profile is checked here as text (testdata/profile.sb), not run.
//
// # Not covered
//
//   - File descriptors open before the sandbox starts stay writable: the
//     agent writes its stdout and stderr pipes, and ralph gives it nothing
//     else.
//   - Unix sockets on the host remain reachable (connecting needs no write
//     access to the file system): the Docker socket, ssh-agent, a D-Bus
//     session. An agent that can use the Docker socket can do anything.
//   - The network: the agent can reach any host and any local service.
//   - Writes through the temp directory when it is shared (/tmp without
//     TMPDIR): other programs' files there are as writable as outside.
//   - ralph's controlling terminal, when the caller leaves the agent in
//     ralph's session (see --new-session above).
//   - /dev/shm is not the host's: a program that expects to meet another
//     through /dev/shm across the sandbox does not.
//   - The state directories are the runner's to name; Dirs cannot know
//     them, and Command grants only what it is given.
package sandbox
