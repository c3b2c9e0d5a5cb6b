// Package broker is how a sandboxed agent's `$RALPH_BIN task …` commands
// reach the plan (ARCHITECTURE.md §7.4). Inside the
// sandbox the plan — .ralph/, the database — is read-only and the
// database's credentials are withheld, so the agent cannot move a task by
// writing the store. Instead the loop hands each session a
// loop.PlanAccess (RunRequest.Plan), and the process that runs the agent
// (package agentproc, for a Spec with a Sandbox) serves it with a Server
// on a Unix socket of the session's own, named by $RALPH_SOCKET in the
// agent's environment; `ralph task` uses it whenever that variable is
// set, in preference to --dir, $RALPH_DB and --plan. The package imports
// loop and the standard library only, so that a program embedding the
// library gets peek mode in a sandbox too.
//
// # What is served, and as whom
//
// The broker serves this run's plan only (the store the loop runs on), and
// only the commands ARCHITECTURE.md §7 lists, each as one or more store
// calls:
//
//   - peek, show, list, plan-status: Ready, Active, Get, Logs, Counts and
//     loop.TaskLister's ListTasks, as the store answers them;
//   - claim (peek mode only: ModeBuild with ClaimAgent, and no task the
//     loop claimed for the session): as the session's agent, held by the
//     session's loop (PlanAccess.Holder, claim mode agent) exactly like a
//     claim made with $RALPH_HOLDER; a claim without a task id takes from
//     the run's scope, one with an id takes that task as `ralph task
//     claim ID` does; the lease is the command's, else the run's;
//   - done and fail: as the session's agent, so the store's own rules
//     (loop.CheckMove) refuse another agent's task (loop.ErrNotHolder)
//     and a claim the loop made (loop.ErrLoopClaim: the agent ends its
//     answer with the sigil instead);
//   - add and dep add (loop.TaskAdder): plan mode, and follow-up tasks;
//   - note (loop.TaskNoter): a log entry of kind note, by the agent.
//
// A move is never made as a person, never with force and never as the
// loop: a request whose actor is not the session's agent — an agent id
// other than PlanAccess.Agent, no agent id at all (a person), Force or
// Loop set — is refused with ErrRefused, and so is a claim by another
// agent id. The verifier's session (PlanAccess.ReadOnly) gets the read
// commands only. Release, reset, block, unblock, dep rm, import and export
// are not served; `ralph task` refuses them when $RALPH_SOCKET is set. A
// store that lacks an optional interface answers those commands with
// ErrUnsupported. For scope, only an id-less claim is narrowed to the
// run's: what peek, list and plan-status print is what the same commands
// print outside the sandbox (the black-box tests compare them).
//
// # Who may connect
//
// The caller is known by its socket — one socket per agent session,
// made by Listen in a new directory of its own (mode 0700) under the temp
// directory (or /tmp when that path would not fit sun_path) and removed
// by Close — and checked by its peer credentials on every connection: on
// Linux, SO_PEERCRED gives the connecting process's uid, which must be
// ours, and its pid, which must be the process Admit named (the process
// the agent was started as: under bubblewrap, the bubblewrap that owns
// the sandbox's pid namespace) or one of its descendants, found by
// walking the parent links of /proc. A process cannot change its parent,
// and in a sandbox with its own pid namespace every process the agent
// starts, orphans included, stays below that process; another agent's
// processes, in their own namespaces, never are, nor is ralph itself or
// anything else on the machine. The walk names each process by its start
// time and is read twice, so that a pid that ended and was reused during
// the check fails it; with SO_PEERPIDFD (Linux 6.5) the connecting
// process is also known to be alive after the walk. A connection made
// before Admit (an agent quicker than its starter) waits for it up to
// AdmitWait. Elsewhere than Linux every connection is refused (the
// broker cannot tell one agent's process from another's there): a
// sandboxed agent then reads the plan read-only and cannot change it.
//
// # The protocol
//
// A client connects once for a command and sends requests one after the
// other on that connection, each a line of JSON (at most MaxRequest
// bytes); the broker answers each with lines of JSON, the last of which
// ends the answer ("end", or "error" with the store's message, the names
// of the sentinel errors it wraps and whether it is temporary, and its
// *loop.TransitionError, *loop.HeldError or *RefusalError, so that
// errors.Is, errors.As and the messages are the same on both sides). A
// listing streams one line a task, after a line with its shape when
// asked; a client reads lines of at most MaxFrame bytes. The broker serves
// MaxConns connections at once, closes one idle for IdleTimeout or that
// does not read its answer for WriteTimeout, and refuses and closes one
// that sends a line that is too long or not a request. A cancelled
// context (Serve's) stops serving: the listener and every connection are
// closed, and requests in flight are cancelled.
//
// # When the broker cannot be reached
//
// Dial fails with ErrUnreachable when no broker answers: no socket, or a
// sandbox that refuses connect(2) (Codex's read-only sandbox does). `ralph
// task` then reads the plan through a read-only open of the SQLite
// database (dag.Options.ReadOnly; it works in a read-only bind mount, a
// live write-ahead log included), and refuses its write commands with a
// message that says why. A plan on a database server cannot be read that
// way: its credentials are withheld.
package broker
