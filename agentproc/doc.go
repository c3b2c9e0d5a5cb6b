// Package agentproc runs one agent CLI process for a runner (claude,
// agents/codex, agents/gemini, agents/opencode): it starts the agent in a
// process group of its own with a parent-death signal, feeds its standard
// input, copies its standard output to the raw log as it is read and
// hands it to the runner's decoder, drains its standard error, enforces
// the wall-clock, idle and result timeouts, and stops and reaps the agent
// and every process it started before Run returns. It also runs a build's
// other commands — the test gate, --setup — the same way (Commands, a
// loop.CommandRunner), resolves agent executables (LookPath), builds their
// environments (Environ), writes temporary files and directories named
// after this process (TempFile, TempDir), reads lines of any length
// (LineReader), and stops what a dead ralph left behind (Sweep).
//
// # Decisions where DESIGN.md is silent
//
// Raw log. The stream goes to Spec.LogPath byte for byte as it is read,
// stderr excluded. The file is opened for appending (created with its
// directory if missing), never truncated: the loop runs an iteration again
// under the same number after a usage-limit wait, and the log then holds
// every attempt, in order. An earlier stream cut in the middle of a line
// (its agent killed) is ended with a newline first. A write that fails (a
// full disk) ends the log there but not the session: Exit.LogErr says why.
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
// A result ends the session (DESIGN §8). Once the decoder emits an
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
// ralph itself died is Sweep's (below).
//
// A pass that finds nothing — the usual case — reads /proc, the stat of
// every process, and the environment of those of this user younger than
// the agent: 0.7 ms on the development machine with 75 processes (go test
// ./agentproc -run '^$' -bench BenchmarkReapNothingLeft). Outside Linux
// there is no subreaper, marker search nor parent-death signal: the
// process group alone is stopped and waited for, and once it is gone,
// reading the stream gives up when a read has waited 2 s for more in vain,
// in case a process that left the group still holds the pipe (a reader
// still busy with what it read — a huge line, a slow OnEvent — is waited
// for).
//
// Sandboxed runs (DESIGN §13, package sandbox). With Spec.Sandbox set, Run
// prepares the agent's session in the project's sandbox.Boundary before
// starting it, in a scratch directory of its own (TempDir kind
// "sandbox"): the agent writes its tree (Spec.Dir's: the project, or its
// worker's tree), its own temp directory (TMPDIR) and a scratch copy of
// each of its state directories (Spec.State, the runner's StateDirs, in
// which only the login files are the real ones), and works in a private
// copy of the tree's git metadata. Once the agent and everything it
// started are gone, Run asks the session how that copy's HEAD moved
// (Exit.Checkout, which runners pass on as RunResult.Checkout: the
// workspace then knows an agent's reset from its work), then removes the
// scratch, directories the agent made unreadable included. A working
// directory the Boundary does not cover starts nothing (an error). The
// sandboxed agent gets a session of its own (setsid) rather than only a
// process group, so that it cannot type into ralph's terminal; the
// process handling is otherwise the same, bubblewrap's pid namespace
// adding that nothing of the sandbox outlives it.
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
// Leftovers of a dead ralph (DESIGN §8, "Holders", "Claim generations").
// The parent-death signal reaches the agent only; what the agent started
// is found by Sweep at the next start of ralph: a process of this user
// whose environment holds RALPH_HOLDER (every agent gets it from the loop,
// its descendants inherit it) naming a holder that is gone on this host
// identity, and that started at or after that holder — never this process,
// its ancestors or pid 1, never a holder on another host or one whose
// liveness is unknown. It gets SIGTERM and SIGCONT, then SIGKILL after a
// grace period (default 5 s), through a pidfd. TempFile names its files
// ralph-<kind>-<pid>-<start>-<host>-<random><suffix> after the process
// that wrote them (host: a hash of its host identity, as /tmp may be
// shared by pid namespaces), and Sweep removes those whose writer is gone,
// of any kind (the system prompt files of earlier releases,
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
// Executables and environments. LookPath takes the flag's value, else the
// environment variable's, else the name on PATH, and its error names where
// a missing path came from and how to install the agent; it wraps
// loop.ErrAgentNotFound, as does Run's error for a Path that cannot be
// executed. Environ layers a runner's entries over ralph's own, a later
// entry winning in the place of the first, and drops what the runner says
// (API keys it must not pass on).
package agentproc
