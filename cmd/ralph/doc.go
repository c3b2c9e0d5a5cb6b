// Command ralph is the command-line front of the ralph library: it wires
// flags to package dag (the task graph) and package loop, and prints. No
// loop policy lives here (ARCHITECTURE.md §1); the README says what each
// command does, and this comment records the decisions behind it.
//
// # Errors and exit codes
//
// Every command other than build, plan and prompt exits 0 on success, 1 on
// an error (bad usage included) and 2 when there was nothing to do: `task
// claim` with no id and nothing ready, and `task import` of a file with no
// tasks; and 130 when SIGINT or SIGTERM cancelled it. Errors are one line
// on stderr, "ralph: <message>"; the package prefixes of library errors
// ("loop: ", "dag: ") are dropped from the message, and the library errors
// that speak of a field a flag sets (parallel.IntoError: Config.Into) are
// worded with the flag (--into), found with errors.Is and errors.As and
// kept in the chain (liberrors.go); the texts of package parallel that
// reach the CLI only as words name the flags because ralph build hands it
// its words (parallel.Config.Words, liberrors.go). Only run maps errors
// to exit codes: urfave/cli's exit handler is disabled, and every command
// reports a bad flag as a one-line usage error instead of printing its
// help.
//
// # What reaches the terminal
//
// Text is data (ARCHITECTURE.md §7): every byte the commands print, on
// stdout and stderr, passes through an escaping writer (terminal.go,
// claude.EscapeWriter) that shows each control character but newline and
// tab as an escape in Go's notation — \x1b, \r, \a, \u007f, \u009b, and
// \xNN for a byte that is not UTF-8 — so that a task's title or
// description, an agent's words or an error quoting an import file can
// neither clear the screen nor write the clipboard (OSC 52), nor move the
// cursor over what ralph printed. This holds for a pipe too (what is piped
// is usually shown later). The plan keeps the text as it was given.
// Backslashes are not escaped: the escapes are for reading, and escaping
// twice changes nothing. JSON output stays valid JSON that means the same:
// encoding/json escapes the C0 controls itself, and a DEL or C1 control it
// writes raw comes out as \u007f or \u0080–\u009f, JSON's own notation;
// `task export` imports back unchanged. The build view's colours and the
// board of a parallel build are the only escape sequences ralph writes:
// those two printers write to the terminal directly and escape all the text
// they show.
//
// # Version
//
// `ralph --version` and `ralph version` print one line, "ralph version V",
// followed, when the binary records a commit, by "(commit HASH, TIME[,
// modified])". V is the -ldflags "-X main.version=…" value if given, else
// the module version from runtime/debug.ReadBuildInfo (a pseudo-version in
// a checkout built by Go 1.24 or later), else "dev"; HASH, TIME and
// modified are its vcs.revision, vcs.time and vcs.modified settings. `ralph
// version --json` prints them as an object with the fields version,
// commit, commit_time, modified and go (the Go release), the three VCS
// ones null when unknown (versionInfo). The command is hidden from `ralph
// --help`, which lists --version and stays as it was.
//
// Usage errors suggest: an unknown command, or an unknown flag (among the
// command's own and the global ones), gets ", did you mean NAME?" when
// exactly one name is near (suggest.go, nearest), and a value a duration
// flag cannot parse says that a duration needs a unit. The start of the
// flag package's message (`flag provided but not defined: -x`, `invalid
// value "30" for flag -timeout:`) is kept, as is exit 1.
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
// SessionEnd hook in .claude/settings.json. Claude Code runs SessionEnd
// hooks at the end of every `claude -p` session, normal exits included, so
// the hook runs the hidden `ralph hook session-end`, which changes nothing
// while the loop named by $RALPH_HOLDER lives (the loop decides what
// becomes of the session's tasks), releases the agent's claims once that
// loop is gone, and does nothing outside a ralph run (the shell test spares
// starting ralph then). init prints one line per thing created. An existing
// ralph-build.md is never overwritten (delete it to get the current one).
// The hook is merged into existing settings: other keys, other events'
// hooks and other SessionEnd entries are kept, in their order. A hook an
// earlier ralph installed (`task release --agent "$RALPH_AGENT_ID"`, which
// released the loop's own claim) has its command string replaced in place,
// wherever it is, every other byte of the file kept. Settings that are not
// valid JSON or not shaped as Claude Code expects, and a database file that
// is not a ralph database, stop init before it changes anything. Running
// init again changes no file.
//
// # JSON
//
// Task objects (list, show, peek) have exactly the keys id, title,
// description, status, priority, parent_id, feature, claimed_by,
// retry_count, blocked_by, created_at and updated_at, and, after
// blocked_by, check and check_by for a task that has a check (DESIGN §14:
// absent otherwise, so a plan without checks prints as before). parent_id is null
// when absent; feature and claimed_by are always strings, "" when unset, so
// consumers compare them without null checks; blocked_by is [] when empty;
// times are RFC 3339 in UTC with sub-second digits when the store has them.
// show adds logs: [{at, kind, message}]. Output is indented. `task list`
// streams, in both forms: each task is written as the store reads it, so
// a plan of any size lists in flat memory; the table's columns are sized
// from the listing's shape (dag.ListShape, the same snapshot) and are what
// text/tabwriter made of the whole list. --limit N lists the first N tasks
// of the plan order (0, the default, lists all). plan-status
// --json has the keys open, active, done, failed, blocked and total;
// `feature list --json` prints [{name, spec, plan, created_at}].
//
// # Checks
//
// `task add --check CMD` gives the task its own check, run by the build
// after the agent reports it done (loop.Task.Check). The check is marked
// as an agent's (loop.Task.CheckBy) when $RALPH_AGENT_ID is set, and
// always when a sandboxed agent adds it through the broker, which sets
// the mark itself; `task show` prints it as "check: CMD  (written by agent
// ID)". `task import` keeps each line's check_by as it is: an import is
// not served to a sandboxed agent.
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
// user-NAME`. The lease is --lease (default 15m). A claim made with
// $RALPH_HOLDER set (an agent inside a ralph session, peek mode) takes it
// as its holder and is an agent's claim; without it, the claim has a lease
// only. Inside a session where the loop claimed a task for the agent
// ($RALPH_TASK_ID set), `task claim` is refused: that task is the agent's
// whole job. Every `ralph task` command first returns expired claims, and
// claims whose holder process is gone, to pending (Store.Recover), read
// commands too when the database can be written.
//
// done and fail take --agent (default $RALPH_AGENT_ID): an agent moves only
// what it holds, never a claim its live loop made for it (loop.CheckMove);
// without an agent id the caller is a person (user-$USER in the history),
// who needs --force for a task a live agent holds. release leaves the
// claims of the agent's live loop to that loop.
//
// # In a sandboxed agent's session
//
// With $RALPH_SOCKET set (a sandboxed session: package broker) peek, show,
// list, plan-status, claim, done, fail, add, dep add and note go through
// the session's broker, whatever --dir, $RALPH_DB and --plan say, and
// print and exit exactly as they do directly; the broker applies them as
// the session's agent, so --agent of another agent, a person's move and
// --force are refused (an agent's --force means nothing, as directly). The
// other task commands (release, reset, block, unblock, dep rm, import,
// export) fail saying they are not served. When no broker answers at
// $RALPH_SOCKET, the read commands read the project's plan opened
// read-only and the write commands fail saying why. `ralph task note ID
// MESSAGE` adds a log entry of kind note, by the agent of --agent or
// $RALPH_AGENT_ID, else by the person; it changes nothing else. `ralph
// hook session-end` does nothing when $RALPH_SOCKET is set.
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
// "<!-- id: X -->". A checklist imports idempotently (dag.SkipPresent): an
// item whose id, or else whose title, is already a task is skipped, and its
// children hang under that task; so importing the same list twice adds
// nothing, and a longer version adds only what is new. JSON Lines stay
// strict: a known id is an error. No dependencies are implied: file order is
// claim order at equal priority (priority stays the default). Everything is
// added in one transaction, and an error names the line. JSON Lines stream
// (dag.Store.ImportFrom): the file is read twice, once to check every task
// and reference and once to write, and never held in memory (standard input
// that cannot seek is first copied to a temporary file, removed at once);
// parents and blockers may name tasks further down, and a parent is
// inserted before its children. `--dry-run` makes the import, checks
// included, prints what it added in insertion order, and rolls it back.
//
// The JSON Lines format is dag.ReadJSONL's: ralph's own keys (id, title,
// description, priority, parent, blocked_by, status), strictly, plus an
// optional feature key that export writes only for tasks that have a
// feature, so that export → import keeps it; or a beads issue as `bd
// export` writes it, recognised by its dependencies or issue_type keys or
// (beads 1.x) its "_type": "issue"; lines of another _type (memories) are
// passed over. What `bd list --json` prints (beads 1.x: an array of
// issues, or an object holding it under "data" or "issues") is read too,
// whole. From beads, id, title, description and priority (0-4, lower
// first in both) map as they are; status open, in_progress and hooked
// become pending, blocked and deferred become blocked, closed becomes
// done, a tombstone (deleted issue) or a pinned issue (a context bead,
// not work) is skipped along with the references to it, and other
// statuses (custom ones) are refused; a "blocks" or "waits-for"
// dependency becomes blocked_by and a "parent-child" one (or the parent
// key of bd list) the parent; a "conditional-blocks" one (run only if the
// other fails, which ralph has no edge for) makes the task blocked, for a
// person to decide, and says so in its description; design, acceptance
// criteria and notes are appended to the description under headings.
// Dropped: issue_type, labels, assignee, comments, external refs,
// metadata, timestamps (tasks are created at import time, in file order),
// and the other dependency types ("related", "discovered-from", …). A
// list that names an issue it leaves out (bd list without --all leaves
// the closed ones out) is refused, saying so. A parent named further down the file than its children is
// moved before them. `task export` writes ralph's format, which imports
// back unchanged.
//
// # Features
//
// `feature add NAME` takes a name of letters, digits, '.', '_' and '-'
// (it names a directory), creates .ralph/features/NAME/spec.md and plan.md
// (copies of --spec and --plan when given, else a one-line heading:
// loop.FeatureSpecStub for the spec, which `ralph plan` takes for "no spec
// yet" as long as it is unchanged, and loop.FeaturePlanStub for the plan,
// which the planner is not shown as notes; files already there are kept
// unless a copy was asked for), then records the feature with paths
// relative to the project root. If recording fails, the files it created
// are removed. `ralph plan` without --feature plans every feature that has
// a spec, along with specs/*.md; with --feature F, F alone.
//
// # build
//
// `ralph build` only wires: flags become a loop.Config, the store is the
// task graph (or the progress file of --progress), the runner is the
// chosen agent's (agentcli.go), and the exit code is the Report's (loop.Report.ExitCode);
// no policy of ARCHITECTURE.md §3 or §6 is re-derived here. The checks come
// in this order: the command line (a usage error, exit 1: --feature with
// --task,
// --progress with --feature or --claim agent, a bad --strategy, --claim or
// --on-usage-limit); the store (exit 2 with a hint: no .ralph/ — "run
// 'ralph init', then 'ralph plan'" —, no database, no progress file); a
// --feature that does not exist (exit 1); then, except for --dry-run, the
// agent (--claude PATH, else $RALPH_CLAUDE, else claude on PATH; not found
// is exit 1 before anything is claimed). An empty plan is the loop's
// NoPlan, exit 2, with "run 'ralph plan' first" added to its message.
//
// Agents and GitHub (DESIGN §16). --agent-cli takes a comma-separated
// list: each agent's executable is found first (--agent-bin only with
// one agent), and their runners, each wrapped as the progress file needs,
// become one loop.Pool (also for a single agent with
// --max-cost-per-agent); the policy of moving on is the loop's. --pr is
// resolved before anything runs (prepPR: the push remote, the repository,
// a token) and acts after a parallel build that completed (pr.finish);
// --pr-follow's rounds are forge.Follow's, each round a parallel build
// again. Whatever is written to GitHub is decided from ralph's own
// records (plan settings github_repo, github_issue_N, pr_finding_<id>),
// never from a task id alone, which an agent may have chosen.
//
// Output. The live view goes to stdout: the session's name and log
// directory, a header per iteration ("== iteration N · ID title · model
// M"), the agent's events through claude.Formatter (colour only on a
// terminal and without NO_COLOR), a footer per agent session (duration,
// turns, tokens, cost and how it ended, from the runner's own result, which
// the view taps from the Runner), the verifier's verdict,
// usage-limit waits, the loop's notices ("note: …"), how each iteration
// ended, then the run's totals when the plan was counted ("run: D done, F
// failed, R remain · $C over N agent sessions · next: COMMAND", the command
// by outcome: nextCommand), then "session log: PATH". The closing line is
// the Report's message:
// on stdout for an exit-0 outcome (complete, iteration limit with "N tasks
// remain"), as "ralph: <message>" on stderr for every other outcome, like
// any error ("ralph: usage limit reached; resets at <RFC 3339 time>",
// "ralph: interrupted" with exit 130). The notice about ANTHROPIC_API_KEY
// and ANTHROPIC_AUTH_TOKEN (apiKeyNoticeText) is printed once per run on stderr, before the first
// iteration. stdout is for following the run; scripts read the exit code.
//
// Environment and logs. RALPH_BIN is os.Executable made absolute (peek mode
// refuses to start without it; otherwise a warning); RALPH_DIR is the
// project root; the agent id is the loop's, fresh per run. The session log
// and the raw stream of every session are always written, under
// <root>/.ralph/logs. --max-wait 0 means "do not wait" (the stop policy),
// not the loop's default. Cancelling the context (SIGINT, SIGTERM in main)
// is the loop's OutcomeCancelled: the agent's group is stopped, claims are
// released, the summary is written, exit 130.
//
// --dry-run prints "next task: ID title" (in peek mode "first claimable
// task (the agent picks): …"), "model: M", "prompt: NAME (SOURCE)" and
// "system prompt: system-NAME (SOURCE)",
// starts no agent, needs none installed, and writes nothing; with nothing
// to run it prints the loop's reason like a run would (exit 2 for an empty
// plan, 0 otherwise).
//
// --progress FILE is relative to the working directory, like every file
// argument, and needs no `ralph init` (logs still go to <root>/.ralph/logs;
// receipts are not stored, so `ralph status` does not show such runs). The
// file's bookkeeping is the library's, wired here: the agent's runner is
// wrapped in progress.DocumentRunner (a final text that is a whole
// progress file, starting "# Progress:", replaces the file before the loop
// looks at the task; a document that drops boxes or does not parse is
// refused with a note and the file is left as it was), and the loop gets
// the store as progress.Recorder, its IterationRecorder: after every
// iteration that counts (not a usage-limit wait) a row goes to the
// Iteration Log, which trims Recent Attempts to five; an iteration that
// neither finished nor failed its task also adds an attempt block saying
// why (a failed task gets its block from the store). RALPH_DONE ends the
// run through the loop's Finisher hook, which progress.Store implements.
//
// # status
//
// `ralph status` shows the whole plan's counts (the plan-status line),
// the active claims with holder, lease age (since the claim, as in `task
// peek`) and lease time left, the latest 10 receipts (oldest first, so the
// newest is nearest the prompt) and the cost of every receipt in the
// database. `--json` prints {counts, active, receipts, sessions,
// total_cost_usd}: counts has the keys of `plan-status --json`; active
// entries have id, title, claimed_by, claimed_at, lease_expires_at,
// lease_age_seconds and lease_left_seconds (negative once expired);
// receipts, newest first, have session, iteration, mode, task_id, model,
// input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
// cost_usd, started_at, duration_seconds, turns, exit_reason and verdict;
// sessions counts every receipt (verifier sessions included) and
// total_cost_usd sums them. Arrays are [] when empty. When the store holds
// a run record, status leads with the last run ("last run: build complete
// (exit 0) · done 2, failed 0, remaining 0 · $0.2500 over 2 agent sessions
// · ended 3m ago", then a blank line) and --json has last_run first, an
// object as `ralph runs --json` prints; with no run the output is as
// before, last_run left out.
//
// # Configuration
//
// .ralph/config.toml (config.go) holds defaults for the flags of build,
// plan and prompt: a table per command, its keys the flag names, so that
// every flag works there without a list to keep. TOML (BurntSushi/toml,
// the Go field's long-kept parser; the format Codex and many Go tools
// use): comments, strings without YAML's surprises. Precedence: the
// command line, then the flag's variable (a variable set empty does not
// count), then the file, then the default; a value the file gives is set
// on the flag (cli.Context.Set), so everything after reads one place. A
// bad file is a usage error before anything runs. The file is opened
// below the project root without following a link (package safefile):
// it is read from the project's .ralph/ only. `build --dry-run` prints
// the settings and their sources after its other lines, which stay as
// they were.
//
// # runs
//
// build, plan and prompt each record their run in the store
// (loop.RunRecorder; runs.go): begun at the loop's first note, so that a
// command refused before its loop starts (bad flags or configuration, a
// missing agent, a dry run) is no run and changes nothing; ended by a
// deferred call however the command returns, with the exit code run gives
// its error and the outcome of its report (or of that exit code, for an
// error before any report); the counts are the run's scope's at the end.
// The CLI writes the records, not package loop, since a run's kind and
// exit code are the CLI's. Only kill -9 leaves a record running; its
// holder (pid, start time, host) then shows it "died"
// (loop.RunRecord.Settled). `ralph runs [-n N] [--json]` lists the latest
// N (default 20, 0 all), newest first; --json is an array of {id, kind,
// outcome, exit_code, done, failed, remaining, cost_usd, agents,
// started_at, ended_at, host, pid, holder, integration_tip, version}:
// outcome is a loop.Outcome word, "running" or "died"; exit_code null
// while running and for a run that died; ended_at "" until the run ends;
// version the ralph that ran it, `ralph version`'s figures in one string
// (versionInfo.brief: "v1.2.3 (commit HASH, modified, go1.26.0)").
//
// --notify (notify.go, package notify) rides on the run record: the
// notifier sees the notes the record begins with, and the record's end
// sends run_end with the same outcome, exit code and counts, then waits
// at most 15 s for the targets. So a command refused before its loop
// starts notifies nobody, as it records nothing; a run over a progress
// file, which records nothing, still notifies. Command targets run with
// agentproc.Commands on the host (never in the --sandbox box: they are the
// user's, from flags or $RALPH_NOTIFY); a bad target is a usage error.
//
// `ralph clean [--dry-run]` (clean.go) removes what parallel builds left
// whose work landed on the plan's recorded integration branch, as
// parallel.Clean decides, and lists everything it keeps with why; exit
// 1 outside a git repository or without a task database. The remote of
// --remote builds is not touched.
package main
