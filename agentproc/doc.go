// Package agentproc runs one agent CLI process for a runner (claude,
// agents/codex, agents/gemini, agents/opencode): it starts the agent in a
// process group of its own with a parent-death signal, feeds its standard
// input, copies its standard output to the raw log as it is read and
// hands it to the runner's decoder, drains its standard error, enforces
// the wall-clock, idle and result timeouts, and stops and reaps the agent
// and every process it started before Run returns. It also runs a build's
// other commands — the test gate, --setup — the same way (Commands, a
// loop.CommandRunner), resolves agent executables (Bin), builds their
// environments (Environ), writes temporary files and directories named
// after this process (TempFile, TempDir), reads lines of any length
// (LineReader), and stops what a dead ralph left behind: at once, by a
// watchdog process (Linux), and at the next start of ralph (Sweep).
//
// It is also the skeleton the four runners share, so that each holds only
// what is its agent's (arguments, environment, stream decoding,
// classification): Bin finds the executable and a missing one is a
// *NotFoundError; Spec.WithRequest takes the loop's request; Exit.Ending
// maps how Run ended to the Ending a runner's Classify reads, and
// Ending.Stopped the class of a stop ralph ordered; Exit.Fill puts what
// Run measured into the result; Cut, Malformed and ToolOutputLimit trim
// what decoders keep. How a result is described in one line is
// loop.Describe's, the same in the loop and in the runners' tests.
//
// # Decisions
//
// Raw log. The stream goes to Spec.LogPath byte for byte as it is read,
// stderr excluded. The file is opened for appending (created with its
// directory if missing), never truncated: the loop runs an iteration again
// under the same number after a usage-limit wait, and the log then holds
// every attempt, in order. An earlier stream cut in the middle of a line
// (its agent killed) is ended with a newline first. A write that fails (a
// full disk) ends the log there but not the session: Exit.LogErr says why.
// The log lies in a directory the agent can write (.ralph/logs), so it is
// opened through package safefile from Spec.LogRoot (the project root):
// no symbolic link on the way or at the log is followed, even one that
// stays inside the project, and an existing log must be a regular file
// with a single name — a link planted at the next iteration's stream (to
// ~/.bashrc, or to .ralph/progress.db) would otherwise have ralph append
// the agent's output there. A refused link does not stop the session:
// losing one raw stream is better than stopping the plan. The agent runs,
// its stream is decoded as always but not logged, and Exit.LogErr is the
// refusal (errors.Is safefile.ErrLink), which the loop shows as a notice.
// The same holds for a log reopened after a usage-limit wait.
//
// Timeouts. On cancel, wall timeout or idle timeout the agent is stopped:
// SIGTERM and SIGCONT (a stopped process acts on SIGTERM only once it runs
// again), then SIGKILL after Spec.Grace (default 5 s). The idle timeout
// counts from the start and is reset by every byte on standard output (not
// standard error: a process that only complains is stuck). Standard error
// is drained concurrently; its last 8 KiB go to Exit.Stderr and each line
// to an EventStderr. Exit.Duration is the wall time Run measured.
// cmd.WaitDelay is the grace period.
//
// A result ends the session (ARCHITECTURE.md §4). Once the decoder emits an
// EventResult, the agent has Spec.ResultGrace (default 5 s) to exit and
// the idle timeout no longer applies; an agent still there then is stopped
// as above (Exit.Stop is StopResultGrace, and Exit.Stderr ends with a line
// saying so). The runner decides what the result is worth.
//
// Nothing outlives the agent. On Linux the agent gets a parent-death
// signal (SIGKILL): if ralph dies, even by SIGKILL, the kernel kills the
// agent at once. The signal is tied to the thread that forked the agent,
// and the Go runtime ends a thread whose locked goroutine returns without
// unlocking, so the agent is started and waited for on a goroutine locked
// to its thread for the agent's whole life. When the agent exits or is
// stopped, Run stops everything it started before returning — shells, MCP
// servers, and processes that left its process group (every CLI's shell
// tool runs commands with setsid; `sleep 25; echo late > late.txt` run
// that way outlived Gemini CLI and OpenCode). On Linux:
//
//   - ralph becomes a child subreaper (PR_SET_CHILD_SUBREAPER), once, at
//     the first Run: a process whose parent dies is re-parented to ralph,
//     not to init, so the agent's orphans stay in reach;
//   - the agent's environment carries RALPH_RUN=<random> (EnvRun), which
//     every process it starts inherits;
//   - after the agent exits or is stopped, Run passes over /proc, again
//     and again until it finds nothing: a live process that started at or
//     after the agent is the run's when it is in the agent's process
//     group, carries the marker, descends (parent by parent) from the
//     agent or from a process found to be the run's, was recorded as the
//     run's earlier (see below), or — an orphan re-parented to ralph,
//     running another executable than ralph's — holds the agent's stdout
//     or stderr pipe; a pass that finds nothing but an orphan re-parented
//     to ralph caught in the middle of an exec (its environment and its
//     arguments both read empty then, so no marker shows) is not trusted,
//     and Run looks again, for up to 2 s;
//   - what is found is stopped all at once: SIGSTOP to all, then SIGTERM,
//     then SIGCONT (signalled one by one, a shell whose sleep is killed
//     runs its next command before its own signal comes), and SIGKILL
//     (again after SIGSTOP) at the end of the grace period, which is not
//     granted twice; each is signalled through a pidfd opened before its
//     start time was checked once more, so a reused pid is never hit;
//   - zombies of the run that were re-parented to ralph are reaped with
//     wait4 on their pids only — never wait4(-1), which would take
//     exec.Cmd's children from it, and never a child ralph started itself
//     (only processes found to be the run's are waited for);
//   - Run returns once nothing of the run is left (or killWait, 2 s, after
//     the SIGKILL, for a process stuck in the kernel).
//
// The agent's tree is also recorded while it still hangs together: when
// Run decides to stop the agent, and when the decoder emits the result
// (the tools have run by then). A process that cleared its environment
// (env -i) and left the group is then still known as the run's after its
// parent is gone. Concurrent runs in one process (parallel workers) keep
// to their own: each has its own marker, group, tree and pipes, so a run
// that ends never stops another's processes, a detached one re-parented
// to ralph included (tested).
//
// What is not covered: a process that cleared its environment, left the
// group, let go of the agent's pipes and whose parent died before the
// tree was last recorded — `setsid env -i cmd >/dev/null 2>&1 &` run by an
// agent that then exits without a result — is not told from ralph's own
// children; and a process that left the agent's tree through another
// subreaper or a service manager (systemd-run) and cleared its
// environment. A zombie of the run re-parented to ralph that exited before
// any pass saw it alive, outside the agent's group, stays a zombie until
// ralph exits (it holds a pid, no memory). Being a subreaper has a cost
// for an embedder: orphans of its own children (a daemonizing `git gc
// --auto`) are re-parented to ralph too, and are left as zombies when
// they exit, as Run reaps only its runs' processes. What is left after
// ralph itself died is the watchdog's, then Sweep's (below).
//
// A pass that finds nothing — the usual case — reads /proc, the stat of
// every process, and the environment of those of this user younger than
// the agent: 0.7 ms on the development machine with 75 processes (go test
// ./agentproc -run '^$' -bench BenchmarkReapNothingLeft). On Windows the
// agent is started suspended, in a console process group of its own, put
// in a Job Object of its own created with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
// and only then resumed (proc_windows.go): whatever it starts is in the
// job and cannot break away. Stopping sends the group CTRL_BREAK_EVENT
// (Windows' nearest to SIGTERM, which reaches only processes sharing
// ralph's console) and terminates the job at the end of the grace period;
// after the agent exits, what is left in the job gets the same, and Run
// returns once the job is empty (killWait at most). If ralph dies, its
// handle to the job closes and Windows kills the job's processes: no
// watchdog or sweep is needed there. If the job cannot be made (a Windows
// before 8 running ralph inside a job that forbids nesting), the agent is
// resumed outside any job and only it is stopped. On other Unix systems
// there is no subreaper, marker search nor parent-death signal: the
// process group alone is stopped and waited for, and once it is gone,
// reading the stream gives up when a read has waited 2 s for more in vain,
// in case a process that left the group still holds the pipe (a reader
// still busy with what it read — a huge line, a slow OnEvent — is waited
// for).
//
// When ralph is killed (ARCHITECTURE.md §7.6). The parent-death signal
// reaches the agent only; what the agent started — a Bash tool's command in
// its group, a `setsid nohup … &`, a daemon that forked twice — would live
// on. So on Linux every process that runs agents has a watchdog: a process
// of its own that learns of ralph's death from the end of a pipe and then
// stops, at once, what ralph's runs left. The choice, among the
// possible ones:
//
//   - A watchdog per ralph process, not per run: it costs one start per
//     process, and a run only three short writes to its pipe. A
//     supervisor between ralph and each agent would cost a start per
//     run and stand in the way of the agent's exit status and signals.
//   - Not a PID namespace around the unsandboxed agent: it needs root or a
//     user namespace (often switched off), the agent would be pid 1 (which
//     SIGTERM does not end by default, and which must reap), and `$RALPH_BIN
//     task …` inside would see another host identity than its holder's
//     (ARCHITECTURE.md §2.2). The sandbox has its namespace (below).
//   - Not a cgroup: a writable, delegated cgroup v2 is missing in most
//     containers and for most users, and when ralph dies someone must
//     still kill the cgroup — a watchdog all the same.
//
// The watchdog is this program run again (/proc/self/exe) with argv[0]
// "ralph-watchdog" and one environment variable, intercepted by an init
// of this package before main: a program that links agentproc — ralph,
// a library user's binary with claude.Runner, a go test binary — needs
// nothing else. Package initializers that come before agentproc's (its
// dependencies, and packages whose import paths sort before it) run in
// the watchdog too, as in any Go program; they should have no side
// effects. A process whose executable is not the Go program (Go built as
// a c-shared or c-archive library) gets no watchdog. The first Run of the
// process starts it and waits for its exec (the program's start, not its
// initializers), in a session of its own, with /dev/null for standard
// input and output, / for its directory, and an environment of three
// variables: the holder of ralph (loop.ThisProcess), TMPDIR, and GORACE
// (a -race binary sleeps a second at exit otherwise). It carries no
// RALPH_RUN nor RALPH_HOLDER, so no reap, sweep or search of environments
// takes it for an agent's process; it ignores SIGINT, SIGTERM, SIGHUP,
// SIGQUIT and the terminal stop signals, and calls itself ralph-watchdog
// (ps). Each Run tells it, one line each, its marker and grace period
// before the agent starts, the agent's pid, start time and pipes once it
// has, and the run's end once everything of the run is gone. Nothing is
// polled: the watchdog blocks reading its pipe, whose only write end is
// ralph's (close-on-exec: no child keeps it past its exec).
//
// When the pipe ends, the watchdog waits (a pidfd, up to 2 s) for ralph
// to be gone — a killed process closes its files a moment before — and
// then, for each run that had not ended, does what Run's reap does, all
// at once: every process started at or after the agent that carries the
// run's marker, is in the agent's process group, descends from such a
// process, or holds the agent's pipes — the agent itself too — gets
// SIGSTOP, SIGTERM, SIGCONT, then SIGKILL (again after SIGSTOP) after the
// run's grace period, each through a pidfd opened before its start time
// was checked once more. At the same time it does what the next ralph's
// Sweep would do for this holder: it stops the processes of this user
// whose RALPH_HOLDER is ralph's (started at or after ralph), and removes
// ralph's temporary files (TempFile). Then it exits; it outlives ralph by
// that clean-up only (about the grace period when something ignores
// SIGTERM, milliseconds otherwise). When ralph ends normally every run
// has ended: the watchdog finds nothing, and exits (measured: within a
// few milliseconds of ralph). The agent's process group counts only while
// its id is the agent's: a live process with the agent's pid and another
// start time means that the group was emptied and its id given out again
// (a group's id is not reused while it has members); Run's own reap keeps
// the same rule.
//
// A watchdog killed while ralph lives (an agent's `pkill ralph` matches
// it) is replaced while runs need one — at once, or a second after the
// last start at the soonest — and the new one is told every run that has
// not ended (tested: an agent that kills it first, then kill -9 of
// ralph). One that exits by itself cannot work here: it is tried again
// at a run a minute later at the soonest. One that stops reading
// (SIGSTOP) is noticed only when a write waits 1 s on a full pipe: ralph
// then lets it go (closes its pipe; a watchdog whose pipe ends while
// ralph lives exits doing nothing) and starts another. If no watchdog can
// be started, runs go on without one, as before: the parent-death signal,
// and the next ralph's Sweep.
//
// With a sandbox (Spec.Sandbox) the kernel does the same on its own:
// bubblewrap runs the agent in a pid namespace whose init has a
// parent-death signal (--die-with-parent), and bubblewrap has the agent's
// (it is the process Run starts): when ralph is killed, the namespace and
// everything in it, detached or not, is gone at once (tested: 14–29 ms
// after the kill, two sandboxed agents with their detached processes, as
// root, and as another user with bubblewrap in a user namespace or
// setuid). The watchdog is there too, for the moment before bubblewrap
// sets its parent-death signal (bubblewrap issue 633), or a bubblewrap
// that lost the one Run gave it (a setuid executable may): bubblewrap is
// the run's agent, which the watchdog stops (SIGKILL after the grace
// period, as it ignores SIGTERM), and the namespace goes with it. A
// sandboxed agent cannot see the watchdog nor ralph (its own pid
// namespace); an unsandboxed one runs as the user and can stop either.
//
// What still escapes: a process that cleared or rewrote its environment
// (env -i: no marker, no holder), left the agent's group, let go of the
// agent's pipes, and whose parent is gone — nothing ties it to the run
// once ralph, its subreaper, is gone (Run's own reap still finds it while
// ralph lives, by its ancestry); a process started by another service at
// the agent's request — `systemd-run --user`, `at`, cron, an ssh to this
// host, a container runtime — which is not the agent's descendant and does
// not inherit its environment; processes of other users (a setuid program
// the agent ran); and everything, outside Linux, that left the agent's
// process group. Costs, on the development machine: starting the watchdog
// 6–7 ms until it runs its own code, of which the first run waits 1.9–2.4
// ms (go test ./agentproc -run '^$' -bench BenchmarkWatchdogStart; the
// ralph binary 6.9–7.4 ms and 1.9–2.5 ms, and idle 1.8 MB of memory of its
// own: go test ./cmd/ralph -run '^$' -bench BenchmarkReapWatchdogStart);
// each run 4.5–9 µs for its three lines (-bench BenchmarkWatchdogRun);
// ralph's overhead around a real Claude Code run unchanged within noise,
// 0.14–0.23% (go test ./claude -run '^$' -bench BenchmarkRunOverhead
// -benchtime=20x).
//
// Sandboxed runs (ARCHITECTURE.md §7, package sandbox). With Spec.Sandbox
// set, Run prepares the agent's session in the project's sandbox.Boundary
// before starting it, in a scratch directory of its own (TempDir kind
// "sandbox"): the agent writes its tree (Spec.Dir's: the project, or its
// worker's tree), its own temp directory (TMPDIR) and a scratch copy of
// each of its state directories (Spec.State, the runner's StateDirs, in
// which only the login files are the real ones), and works in a private
// copy of the tree's git metadata. Once the agent and everything it started
// are gone, Run asks the session how that copy's HEAD moved (Exit.Checkout,
// which runners pass on as RunResult.Checkout: the workspace then knows an
// agent's reset from its work), then removes the scratch, directories the
// agent made unreadable included. A working directory the Boundary does not
// cover starts nothing (an error). The sandboxed agent gets a session of
// its own (setsid) rather than only a process group, so that it cannot type
// into ralph's terminal; the process handling is otherwise the same,
// bubblewrap's pid namespace adding that nothing of the sandbox outlives
// it. With Spec.ReadOnly (a verifier that has a shell: Gemini CLI's and
// OpenCode's) the tree is read-only as well and there is no private
// checkout: the agent runs the tests and writes only its temp directory
// and its state's scratch (sandbox.ReadOnlyEnv sends the usual build
// output there).
//
// Commands. The test gate and --setup run through Commands.RunCommand: sh
// -c with Run's process handling (a group, or a session of its own in the
// sandbox; a cancel stops and reaps everything it started, a detached
// child included — the loop's gate used to leave its children running),
// standard error joined to standard output in the shell so the two keep
// their order, the last 64 KiB kept. With Commands.Sandbox set the command
// runs in the same sandbox as the agent, in the tree it worked in, with no
// state directories: it writes that tree and a temp directory, nothing
// else (a test command the agent edited cannot write the host).
//
// Leftovers of a dead ralph (ARCHITECTURE.md §7.6).
// What a ralph killed without a watchdog left (outside a watchdog's reach:
// above) is found by Sweep at the next start of ralph: a process of this
// user whose environment holds RALPH_HOLDER (every agent gets it from the
// loop, its descendants inherit it) naming a holder that is gone on this
// host identity, and that started at or after that holder — never this
// process, its ancestors or pid 1, never a holder on another host or one
// whose liveness is unknown. It gets SIGTERM and SIGCONT, then SIGKILL
// after a grace period (default 5 s), through a pidfd. TempFile names its
// files ralph-<kind>-<pid>-<start>-<host>-<random><suffix> after the
// process that wrote them (host: a hash of its host identity, as /tmp may
// be shared by pid namespaces), and Sweep removes those whose writer is
// gone, of any kind (the system prompt files of earlier releases,
// ralph-system-prompt-….md, are of kind system-prompt); of directories,
// only the sandbox's scratch ones (TempDir kind "sandbox") are removed,
// whole, when their writer is gone. A sweep that finds
// nothing costs 1.5 ms on the development machine (71 processes; go test
// ./agentproc -run '^$' -bench BenchmarkSweep). Outside Linux Sweep does
// nothing (errors.ErrUnsupported).
//
// Lines. LineReader reads lines with a bufio.Reader of 64 KiB, so most are
// returned where they lie; longer ones (any length) are gathered in a
// buffer that is reused up to 4 MiB, so memory stays flat over long
// streams. A longer line goes to memory of its own (on Linux an mmap grown
// by mremap, so no copies are left behind as it grows), given back at the
// next line or by Release; a decoder that copies a huge string out of it
// can give back the pages it has copied as it goes (Offset, Discard).
//
// Executables and environments. Bin.LookPath takes the caller's path,
// else the environment variable's value, else the name on PATH; its error,
// a *NotFoundError, is loop.ErrAgentNotFound, names where a missing path
// came from and how to install the agent, and names no flag of ralph's
// CLI: the CLI words it with its own (NotFoundError.Missing). Run's error
// for a Path that cannot be executed wraps loop.ErrAgentNotFound too. Environ layers a runner's entries over ralph's own, a later
// entry winning in the place of the first, and drops what the runner says
// (API keys it must not pass on).
//
// The plan through a broker (ARCHITECTURE.md §7). A Spec with a Sandbox and
// a Plan (the session's loop.PlanAccess, from RunRequest.Plan) gets a
// broker.Server: Run listens on a socket in a new directory of its own
// (mode 0700) before the agent starts, sets RALPH_SOCKET to it in the
// agent's environment, admits the agent's process (what it starts may
// connect; nothing else may) as soon as it has started, serves until
// everything the agent started is gone or ctx is cancelled, and then
// removes the socket and its directory. The directory lies in the session's
// scratch directory (TempDir's kind "sandbox"), which the sandbox shows
// read-only — connecting needs no write — and which Sweep removes, socket
// and all, when ralph was killed before removing it; only where that path
// would be too long for a Unix socket does it go in the temp directory
// itself, unswept. A broker that cannot listen fails Run before anything
// starts. An agent outside a sandbox gets no broker and no RALPH_SOCKET —
// an inherited one (ralph run by an agent) is removed from every agent's
// environment: it reaches the plan directly, as the user does.
//
// What a sandboxed agent is not given (ARCHITECTURE.md §7.4). Run removes
// from the environment of an agent it sandboxes every variable Withheld
// names: RALPH_DB (its URL may hold the password; the agent reaches the
// plan through its broker, which wins over RALPH_DB anyway), every
// PostgreSQL client variable (PG*: PGPASSWORD, PGPASSFILE, PGSERVICE,
// PGSERVICEFILE, PGSSLKEY, … — all of the family, not only those that carry
// a secret, so that none added to libpq later slips through; a project
// whose own tests need PostgreSQL variables sets them itself, e.g. in its
// test command), RALPH_SERVE_TOKEN and GitHub's tokens (GH_TOKEN,
// GITHUB_TOKEN, GH_ENTERPRISE_TOKEN, GITHUB_ENTERPRISE_TOKEN). The list is
// withheldEnv and withheldPrefixes, where later secrets (notify URLs)
// belong. Nor is it given another model provider's API key than its own
// (Spec.OwnKeys: claude's, codex's and gemini's runners name theirs;
// OpenCode, which may use any provider, keeps them all). Files that hold
// credentials (~/.pgpass, .ralph/db.json) are the sandbox's to hide, not
// the environment's.
package agentproc
