// Package sandbox runs an agent — and the commands ralph runs for it: the
// test gate, --setup — so that the agent cannot reach past the work it was
// given (ARCHITECTURE.md §7.4). It
// reads everything but a few credential files, reaches the network and
// runs any program as before; it writes only its own tree, a temp
// directory of its own and a scratch copy of its state; and it works with
// a private copy of the git metadata, so that its commits, resets and
// hooks change nothing ralph reads.
//
// Find locates the tool (bwrap on Linux, sandbox-exec on macOS; anywhere
// else it returns ErrUnavailable). Sandbox.Boundary decides, once, what
// the agents of a project may write; Boundary.Prepare readies one agent's
// or command's session and returns the command to run; Session.Close
// says how the private checkout's HEAD moved. The package uses the
// standard library and package hostgit (itself standard library only),
// which finds the repository and builds the git commands it runs on the
// host: two at most per session, in one place (gitcmd.go), with every
// program the repository's configuration names blanked, as for every git
// ralph runs.
//
// # Grants are decided once
//
// A Boundary is made before the first agent starts, from what ralph
// itself knows: the project root, the git repository found there when the
// run begins, and the directory where ralph makes the workers' trees
// (<root>/.ralph/worktrees). What a session may write follows from its
// working directory alone: the project root (or below it, .ralph/
// excluded) writes the project; a directory in the workers' trees writes
// that worker's tree; anything else is refused. No file an agent can edit
// is ever read to widen that: the git directories are never writable, so
// a .git file, a commondir or a gitdir: line an agent writes — "gitdir: /"
// in a project that is not a repository, "/" in .git/commondir — grants
// nothing (the old design read them on every session and granted what
// they named: issue 20, item 1). A worker's git directory is found from
// the repository's side (the worktrees/NAME/gitdir file that names the
// tree's .git, in the common directory no agent writes), never from the
// tree's own .git file.
//
// The repository is discovered as git does it, without running git, by
// hostgit.Find (the same rules as for ralph's own git on the host): the
// first .git up from the root, a directory or a "gitdir: PATH" file, and
// the common directory its commondir names; GIT_CEILING_DIRECTORIES and a
// file system boundary stop it, as they stop the agent's git; files are
// read without blocking (a FIFO planted for a .git file or commondir hangs
// nothing). A worker's tree's git directory is hostgit.Repo.Linked's, the
// one every part of ralph uses. What is found is only ever copied and
// mounted read-only, so a .git an earlier unsandboxed agent tampered with
// can break the agent's git in the sandbox but widen nothing; a git
// directory without HEAD, objects and refs is no repository at all.
// GIT_DIR and the other location variables of the environment are not
// considered, and are removed from the session's environment (the private
// copy is where the tree expects it).
//
// Paths are resolved when they are decided: bubblewrap mounts and the
// macOS kernel check the real path, so a project reached through a
// symbolic link gets its target writable. A tree's .git that has become a
// symbolic link, or changed kind since the Boundary was made, fails the
// session: nothing is mounted on a path that may lead elsewhere.
//
// # What a session writes, and what it does not
//
// Writable: its tree; its own temp directory (TMPDIR, and TMP and TEMP
// where set, name <scratch>/tmp); /dev/shm (a private one); the private
// git metadata; the state directories' scratch and the kept login files
// (below).
//
// Read-only: everything else, in particular the plan's .ralph/ (the
// database, logs, prompts, skills, the verifier's snapshot store, the
// other workers' trees — mounted read-only again inside a writable
// project root; the Boundary makes it when the project has none yet, so
// that an agent cannot make a writable one of its own), the repository's real git directory (objects, refs,
// hooks, config; in the project's own tree it is not even visible: the
// private copy is mounted over it), /tmp and the home directory. A tree's
// .git file and the tree itself are mount points: the agent can neither
// replace its worktree with a link to the main checkout (issue 20, item
// 3), nor its .git with a file naming another git directory.
//
// Hidden (seen as empty files): the plan's database settings
// (.ralph/db.json), PostgreSQL's password and service files (~/.pgpass,
// $PGPASSFILE, ~/.pg_service.conf, $PGSERVICEFILE) and GitHub tokens git
// and gh keep (~/.git-credentials, $XDG_CONFIG_HOME/git/credentials,
// hosts.yml in $GH_CONFIG_DIR, $XDG_CONFIG_HOME/gh and ~/.config/gh); see
// HiddenFiles. The variables holding credentials are withheld by the
// caller (the runner's environment), not here.
//
// Not covered: the network (the agent reaches its model's API, and any
// host); Unix sockets on the host (connecting needs no write access: the
// Docker socket, ssh-agent, a D-Bus session — an agent that can use the
// Docker socket can do anything); file descriptors ralph passes (the
// agent's stdout and stderr pipes); ralph's controlling terminal, when
// the caller leaves the agent in ralph's session (see --new-session
// below); tools' caches in the home directory are read-only like the rest
// of it (go's build cache, npm's): point them at $TMPDIR in --test-cmd or
// --setup where a build needs to write them.
//
// # A git checkout of its own
//
// A session in a git repository gets a private copy of its tree's git
// metadata, made in the session's scratch before it starts: HEAD, the
// index (and a split index's shared files), the repository's config
// without core.worktree, every ref (the repository's packed-refs and its
// loose refs written as one packed-refs file — a file per ref cost more
// than the rest together — symbolic refs kept as files),
// info/exclude, info/sparse-checkout, config.worktree and shallow. The
// objects are not copied: the copy's objects/info/alternates names a
// directory over which the repository's object store is mounted
// read-only (and the stores that one borrows from, by absolute path), so
// the agent's new objects are its own and the shared ones cannot be
// written. It is mounted where the tree expects it — over the project's
// .git directory, or, in a worker's tree, a file "gitdir: <copy>" mounted
// read-only over the tree's .git file — so that git status, diff, add,
// commit, log, branch, reset work as always, and an agent's hooks, config
// and tags stay in the copy. A plain GIT_OBJECT_DIRECTORY would not do:
// it leaks into every git the agent runs, in any repository. ralph takes
// the agent's work from the tree's files, never from this metadata.
//
// Session.Close says where the copy's HEAD started and ended and whether
// the end descends from the start (Checkout; agentproc reports it as
// RunResult.Checkout, so that an agent's `git reset --hard HEAD~1` is not
// landed as a revert). The copy is the agent's: its HEAD and refs are read
// under an os.Root (no link out of it followed, no FIFO blocking ralph),
// and the ancestry is asked of the host's git (built by hostgit) with
// GIT_DIR a directory of the sandbox's own, GIT_OBJECT_DIRECTORY the
// copy's objects and GIT_ALTERNATE_OBJECT_DIRECTORIES the repository's:
// objects are read as data, and no configuration, hook or program of the
// copy is looked at. Anything unclear (a HEAD that is no commit, a missing
// object, a timeout of one minute) is "does not descend". For a repository
// of 10,000 files (an index of 0.8 MB) and 200 branches, making the copy
// and removing it costs 2.9–9.8 ms (go test ./sandbox -run '^$' -bench
// PrivateCheckout -benchtime 50x -count 5, on the shared 2-core
// development machine at a load of 6–8); it grows with the index and the
// number of loose refs.
//
// The submodules' git directories (.git/modules, where a submodule's
// .git file points through the tree's .git) are not copied but mounted
// read-only into the copy: a submodule's git reads — status, diff, log,
// git submodule status — and cannot commit or fetch. Not copied at all:
// the reflogs and git-lfs's object store (.git/lfs: a filter that needs
// it fails).
//
// # Agent state carries no executable configuration out
//
// An agent CLI writes its own directory (~/.claude, ~/.codex, ~/.gemini,
// OpenCode's XDG directories …), and that directory holds configuration
// that runs code in the user's next session — hooks, statusLine and
// apiKeyHelper in Claude Code's settings.json, Codex's notify and MCP
// servers, Gemini CLI's hooks, MCP servers and tool commands, OpenCode's
// plugins — and instructions files (CLAUDE.md, AGENTS.md, GEMINI.md) that
// every later session reads (issue 20, item 7). So each State directory is
// a per-session scratch directory mounted over the real one, in which the
// real directory's entries appear: directories (and files over 1 MiB)
// mounted read-only, smaller files as copies, and the Fresh entries not at
// all (a CLI's databases, transcripts and logs, which it makes anew). The
// CLI can write anything there — a changed settings.json, a new CLAUDE.md,
// a plugin — and all of it is gone when the session ends. Only the Keep
// entries are the real files, mounted writable: the CLI's logins, so that
// a refreshed token is kept (each pinned CLI writes them in place, or, as
// Claude Code does, falls back to writing in place when its rename over a
// mount fails with EBUSY). The mechanism was chosen over read-only mounts
// of the executable files alone because those cannot cover a file that
// does not exist yet (a mount needs an existing mount point, and making
// one would leave empty, broken settings files in the user's home) and
// because a list of what is executable goes stale with each CLI release,
// where "nothing but the login persists" does not. The cost: what the CLI
// records during a sandboxed run (session transcripts, histories) is not
// kept. A state directory is made (mode 0700) when missing, before the
// session; one inside the tree is left alone; one that holds the project
// is refused.
//
// # Linux: bubblewrap
//
// The command is
//
//	env --ignore-signal=TERM bwrap --ro-bind / / --dev /dev --perms 1777 --tmpfs /dev/shm
//	    --proc /proc --unshare-pid --unshare-ipc --die-with-parent --cap-drop ALL
//	    [--cap-add CAP_CHOWN,CAP_DAC_OVERRIDE,CAP_FOWNER,CAP_FSETID when root]
//	    --bind TREE TREE [--ro-bind ROOT/.ralph ROOT/.ralph]
//	    --bind COPY TREE/.git | --ro-bind GITFILE TREE/.git --bind COPY COPY
//	    [--ro-bind GITDIR/modules TREE/.git/modules | COPY/modules]
//	    --ro-bind COMMON/objects SCRATCH/objects
//	    --bind SCRATCH/tmp SCRATCH/tmp
//	    --bind SCRATCH/state-N STATE (--ro-bind|--bind) STATE/ENTRY STATE/ENTRY …
//	    --ro-bind SCRATCH/empty HIDDEN …
//	    --chdir DIR -- env --default-signal=TERM COMMAND ARGS…
//
// Sources are the host's paths (bubblewrap resolves them outside the new
// root), destinations the paths inside, where the earlier mounts are
// already in place: that is how a state directory's real entries are
// mounted into its scratch. The mount points the scratch needs are made
// in the scratch before bubblewrap starts, never in the user's
// directories. /dev is a minimal new one (null, zero, random, tty, pts,
// …), so no host device is writable; /dev/shm is a private tmpfs, mode
// 1777 like the host's so POSIX shared memory and semaphores work for any
// user, gone when the sandbox ends. /proc is a new procfs of the
// sandbox's pid namespace.
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
// has exited (the caller's reaping waits for it). --die-with-parent gives
// the init a parent-death SIGKILL, so a bubblewrap that is killed — by
// ralph after the grace period, or by the kernel when ralph dies — takes
// the whole sandbox with it. This complements the caller's reaping
// (agentproc) rather than replacing it: bubblewrap sets the parent-death
// signal a moment after it forks (its issue 633), so a kill in that
// instant can leave the init running, which the caller's marker sweep
// finds. A new IPC namespace (--unshare-ipc) keeps System V shared memory
// and POSIX message queues private too.
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
// Starting `true` in a session (the private checkout of a small
// repository, a state directory of a dozen entries, the scratch made and
// removed) takes 11 ms at best, 33 ms as the median, against 0.8 and 1.0
// ms unsandboxed and 4.8 and 7.9 ms with the design before this one (ten
// alternating rounds of go test ./sandbox -run '^$' -bench Start
// -benchtime 50x on the shared 2-core development machine at a load of
// 7–8); making and removing the scratch alone (BenchmarkStart/prepare-only,
// mostly file system calls) is 4.7 ms at best, 17 ms as the median. Both
// are far under 1% of an agent's session.
//
// # macOS: sandbox-exec
//
// sandbox-exec cannot mount, so on macOS a session has neither a private
// git checkout nor a scratch state: Prepare writes a profile into the
// scratch and returns `sandbox-exec -f PROFILE COMMAND ARGS…`, which
// allows writing the tree and the temp directory, denies again the plan's
// .ralph/, the repository's git directories and the tree's .git (the
// agent's git reads but cannot commit; Close reports no Checkout), allows
// in each state directory only its Keep entries and its Fresh ones (which
// then persist: choose them so that nothing there runs code), and denies
// reading and writing the hidden files:
//
//	(version 1)
//	(allow default)
//	(deny file-write*)
//	(allow file-write* (subpath TREE) (subpath TMP) (literal STATE/KEEP)
//	    (regex #"^STATE/FRESH(/|$)") … /dev/null, /dev/zero, /dev/tty,
//	    /dev/dtracehelper, /dev/stdout, /dev/stderr, /dev/fd/N, /dev/ttysN,
//	    /private/var/folders)
//	(deny file-write* (subpath ROOT/.ralph))
//	[(allow file-write* (subpath TREE)) when TREE is a worker's, in ROOT/.ralph/worktrees]
//	(deny file-write* (subpath TREE/.git) (subpath GITDIR) …)
//	(deny file-read* file-write* (literal HIDDEN) …)
//
// In SBPL the last matching rule wins, so the denials after the
// allowances carve the read-only paths out of the tree, and a worker's
// tree, which lies in the denied .ralph/, is allowed again before its .git
// and the git directories are denied. /private/var/folders
// holds each user's temporary and cache directories (mode 0700, owned by
// their user), which the system frameworks write whatever TMPDIR says —
// and the user's $TMPDIR is one of them: on macOS a sandboxed agent can
// write the other sessions' scratch directories there (their temp
// directories, the system prompt and configuration files ralph writes for
// other agents), which on Linux it cannot.
// sandbox-exec applies the profile to itself and executes the command,
// which keeps its pid: signals and the exit status reach it directly, and
// the caller's process-group handling is all there is. sandbox-exec is
// deprecated by Apple but still ships with macOS; the profile is checked
// here as text (testdata/profile.sb), not run.
package sandbox
