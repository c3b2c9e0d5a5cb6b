// Command ralph is the command-line front of the ralph library: it wires
// flags to package dag (the task graph) and package loop, and prints. No
// loop policy lives here. The contract is DESIGN §5, §6 and §8; this comment
// records the decisions taken where the design is silent or leaves a choice.
//
// # Errors and exit codes
//
// Every command other than build, plan and prompt exits 0 on success, 1 on
// an error (bad usage included) and 2 when there was nothing to do: `task
// claim` with no id and nothing ready, and `task import` of a file with no
// tasks; and 130 when SIGINT or SIGTERM cancelled it. Errors are one line
// on stderr, "ralph: <message>"; the package prefixes of library errors
// ("loop: ", "dag: ") are dropped from the message. Only run maps errors
// to exit codes: urfave/cli's exit handler is disabled, and every command
// reports a bad flag as a one-line usage error instead of printing its
// help.
//
// # Command lines
//
// Flags may come before or after positional arguments, and the global --dir
// may come after the command (`ralph task list --dir X`): reorderArgs
// rewrites the command line into the order urfave/cli v2 parses, keeping
// each flag with its value; "--" ends the flags as usual. `ralph help task
// add` and `ralph task help add` are `ralph task add --help`. The project is
// the directory named by --dir, else the working directory; ralph does not
// search parent directories. Every command but init needs .ralph/ there and
// says "no ralph project in DIR (run 'ralph init')" otherwise; no command
// but init creates a database.
//
// Commands that change state print nothing on success, except where the
// design says they print an id (`task add`, `task claim`), `task release`
// (the ids it released, one a line; exit 0 also when there were none, since
// the SessionEnd hook runs it blindly), `task import` ("imported N tasks")
// and `feature add` (the two files it made).
//
// # init
//
// init creates .ralph/ with progress.db, prompts/, skills/, logs/ and
// features/, the /ralph-build slash command in .claude/commands/, and a
// SessionEnd hook in .claude/settings.json that runs
// `task release --agent "$RALPH_AGENT_ID"` when that variable is set (it is
// a no-op outside a ralph run). It prints one line per thing created. An
// existing ralph-build.md is never overwritten (delete it to get the current
// one). The hook is merged into existing settings: other keys, other
// events' hooks and other SessionEnd entries are kept, in their order; a
// SessionEnd entry that already runs a `task release --agent
// "$RALPH_AGENT_ID"` counts as ralph's. Settings that are not valid JSON or
// not shaped as Claude Code expects, and a database file that is not a ralph
// database, stop init before it changes anything. Running init again
// changes no file.
//
// # JSON
//
// Task objects (list, show, peek) have exactly the keys id, title,
// description, status, priority, parent_id, feature, claimed_by,
// retry_count, blocked_by, created_at and updated_at. parent_id is null
// when absent; feature and claimed_by are always strings, "" when unset, so
// consumers compare them without null checks; blocked_by is [] when empty;
// times are RFC 3339 in UTC with sub-second digits when the store has them.
// show adds logs: [{at, kind, message}]. Output is indented. plan-status
// --json has the keys open, active, done, failed, blocked and total;
// `feature list --json` prints [{name, spec, plan, created_at}].
//
// # peek
//
// The markdown comes from loop.WritePeek, which the build loop's peek mode
// shares: claimable tasks in claim order (at most -n, default 10) with
// their priority, parent, feature, retries, blockers with the latest log
// message of each (what the blocker's agent reported), and description;
// then the active tasks with holder and lease age. When no task is
// claimable peek prints nothing at all and exits 0, whatever is active.
//
// # claim and release
//
// The agent is --agent, else $RALPH_AGENT_ID, else "user-$USER" (or
// $LOGNAME; "user" when neither is set): a person claiming by hand gets a
// stable holder name they can release with `task release --agent
// user-NAME`. The lease is --lease (default 15m). Every `ralph task`
// command first returns expired claims to pending (Store.RecoverExpired),
// read-only ones included.
//
// # import and export
//
// `task import FILE` (or "-" for standard input) reads JSON Lines when the
// first non-blank character is "{", and a markdown checklist otherwise,
// read by progress.Checklist exactly as `ralph build --progress` reads a
// progress file: "- [ ] item" lines become tasks ("- [x]" done), a heading
// with boxes under it (a phase) becomes their parent (done when all its
// boxes are), indented prose under a box is its description. Ids are the
// checklist's, derived from the text ("phase-1", "add-ci") or given as
// "<!-- id: X -->", so importing the same list twice is refused rather than
// duplicated. No dependencies are implied: file order is claim order at
// equal priority. Everything is added in one transaction, and an error
// names the line.
//
// The JSON Lines format is dag.ReadJSONL's: ralph's own keys (id, title,
// description, priority, parent, blocked_by, status), strictly, plus an
// optional feature key that export writes only for tasks that have a
// feature, so that export → import keeps it; or a beads issue as `bd
// export` writes it, recognised by its dependencies or issue_type keys.
// From beads, id, title, description and priority (0-4, lower first in
// both) map as they are; status open and in_progress become pending,
// blocked and deferred become blocked, closed becomes done, a tombstone
// (deleted issue) is skipped along with the references to it, and other
// statuses are refused; a "blocks" dependency becomes blocked_by and a
// "parent-child" one the parent; design, acceptance criteria and notes are
// appended to the description under headings. Dropped: issue_type, labels,
// assignee, comments, external refs, timestamps (tasks are created at
// import time, in file order), and the "related" and "discovered-from"
// dependencies. A parent named further down the file than its children is
// moved before them. `task export` writes ralph's format, which imports
// back unchanged.
//
// # Features
//
// `feature add NAME` takes a name of letters, digits, '.', '_' and '-'
// (it names a directory), creates .ralph/features/NAME/spec.md and plan.md
// (copies of --spec and --plan when given, else a one-line heading; files
// already there are kept unless a copy was asked for), then records the
// feature with paths relative to the project root. If recording fails, the
// files it created are removed.
package main
