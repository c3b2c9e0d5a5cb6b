// Package loop holds ralph's domain and its build loop: tasks and their
// statuses, the TaskStore and Runner seams that backends implement, the
// loop's state machine, prompts, model strategies, verification, gates and
// the session log.
//
// loop imports only the standard library, packages sigil, hostgit and
// safefile (all three standard library only) and looplab/fsm: embedding
// it never drags in SQLite or the agents' process code (package
// agentproc). It does start processes of its own, with os/exec and
// syscall: git, and the test gate when the Config gives no Commands.
// Every git command it runs is built by hostgit: the repository found
// once when the run begins, the programs its own configuration names
// (hooks, fsmonitor, filters, …) blanked, stopped with SIGTERM when the
// run is cancelled (git removes its lock files on it) and killed
// hostgit.WaitDelay later. A test gate without Commands runs through
// HostCommands, in a process group of its own that a cancel, or the
// gate's exit, kills whole; the CLI gives agentproc.Commands, which runs
// it as it runs an agent and reaps what left the group too. The SQLite
// task graph lives in package dag, the Claude Code runner in package
// claude, and fakes for tests in package looptest.
//
// # Running the loop
//
// Run(ctx, cfg, store, runner) runs ARCHITECTURE.md §3 until an Outcome ends
// it and returns a Report; Outcome.ExitCode (and Report.ExitCode) is the exit
// code (README, "Exit codes"), so the CLI maps nothing itself. DryRun says
// what the next iteration would do without doing it. Start a Config from
// DefaultConfig: MaxRetries 0 really means no retries and Timeout 0 no
// wall-clock limit.
//
// The machine (States, StateEvents, Diagram) is starting → running →
// iteration_complete → running …, ending in done (Complete,
// CompleteWithFailures, LimitReached: Outcome.Succeeded) or failed (every
// other outcome). The goroutine calling Run owns it; events are fired with
// a context detached from cancellation (looplab/fsm wedges on a cancelled
// one) and the loop checks ctx itself between steps.
//
// # Decisions
//
//   - Errors. Run returns a non-nil error exactly when the outcome is
//     OutcomeError (exit 1): a bad Config (ErrConfig), a prompt override
//     that does not load (ErrPrompt), a store error, a Runner error (the
//     agent could not be started at all, e.g. ErrAgentNotFound: retrying
//     would not help, so it is not agent trouble), or a panicking Observer.
//     Every other ending, cancellation included, is an outcome with a nil
//     error and a one-line Report.Message.
//   - No task left in_progress. The loop claims with cfg.AgentID; on every
//     return path it releases its claim and then calls ReleaseAgent for
//     that agent, with context.WithoutCancel and a 10 s timeout. A panic in
//     the store or the runner is let through after that clean-up. A panic
//     in an Observer (in any goroutine: observers also get agent events
//     from the runner's reader) is recovered: the run is cancelled, claims
//     are released and Run returns *ObserverPanicError. Observer calls are
//     serialised by the loop.
//   - Phases. After a build agent's session that reported its task done,
//     the steps that decide whether it is done are each reported as a
//     NotePhaseStart and a NotePhaseEnd note: PhaseVerify around the
//     verifier (with Verify), PhaseGate around the test and commit gates
//     (when either is on) and PhaseIntegrate around landing the work (with
//     a Workspace). Observers that time steps (traces) need both ends; the
//     end's Status is empty when the phase passed. The agent's own session
//     is not a phase: its receipt (StartedAt, Duration) times it. A phase
//     a step before it stopped is not reported at all.
//   - Claiming. The loop claims with an id-less Claim in scope (atomic:
//     the store picks the first ready task), so racing loops never fight
//     over one id; ErrNoReadyTask leads to the terminal checks.
//   - Task trouble (no sigil, wrong id, verify fail) goes through
//     TaskStore.Retry: the claim is released, RetryCount+1 is stored (so
//     the breaker survives restarts) and the reason is logged; the next
//     prompt shows it. A task whose RetryCount already equals MaxRetries is
//     failed instead: at most 1+MaxRetries runs.
//   - Agent and gate trouble are counted in two separate streaks; a clean
//     agent session resets the agent streak, a passing gate the gate
//     streak. Troubled iterations count against MaxIterations. An agent
//     that refused to run as it is set up (ClassRefused: Claude Code
//     skipping permissions as root outside a sandbox, ARCHITECTURE.md §7) stops
//     the run at once with OutcomeAgentFailed, whatever MaxRetries: every
//     retry would be refused the same way. The message is the runner's
//     account, which says what to change.
//   - Gates run only when the agent reported its task done (and the
//     verifier passed): tests first, then the commit. Gate trouble releases
//     the claim (no retry counted on the task). The test command is
//     Config.TestCmd, else the one AGENTS.md names (a "test: <cmd>" line,
//     or the first fenced block under a heading starting with "Test"),
//     read once when the run begins (ReadAgentsTest): in a git repository
//     from the tree of the commit HEAD names then — never from the working
//     copy, which an agent may edit, nor again during the run — and in a
//     directory that is no repository from the file, once. The run
//     announces it in a notice at its start, with the commit, and names a
//     different command the working copy's AGENTS.md holds as not run;
//     DryRun (`ralph build --dry-run`) reports both. A build with workers
//     reads and announces it once. None means no test gate. It runs
//     through Config.Commands (a CommandRunner: the CLI's runs it with the
//     agent's process handling, and in the agent's sandbox with --sandbox,
//     in the tree the agent worked in); without one, HostCommands runs it
//     on the host in a process group of its own, which a cancel, or the
//     command's exit, kills whole: a gate that leaves `sleep 30 &` behind
//     returns when its shell exits. The user's
//     own hooks run on commit (a global core.hooksPath); the repository's
//     do not (package hostgit). A run that commits (the commit gate, a
//     worker's integration) says at its start which filters the
//     repository's own configuration defines, as they do not run in
//     ralph's git (a git-lfs installed with --local: its files would be
//     committed as they are).
//   - The commit gate stages what changed under the project root except
//     <root>/.ralph as `git add --all` would, with hostgit's StageAll:
//     tracked files that changed (`git diff-files
//     --ignore-submodules=dirty`) and, run at the same time, the untracked
//     files git does not ignore (`git ls-files --others
//     --exclude-standard`), recorded with `git update-index`. git add is
//     not used: it runs git status inside every
//     submodule it tracks, with that repository's own configuration — a
//     filter an agent planted in a nested repository's .git/config would
//     run. A repository the agent made inside the tree is committed as
//     git add would (a gitlink). .ralph is left out by an exclude
//     pathspec. It works whether or not git ignores .ralph/, however the
//     rule is spelt (.gitignore, .git/info/exclude, a wider pattern), and
//     never stages .ralph/, not even files under it that were committed
//     before. A project in a subdirectory of a repository
//     stages its own part only; the commit, like `git commit`, takes the
//     whole index, so what a person staged beforehand goes with it.
//     "Changed nothing" is an index equal to HEAD after staging. Any git
//     command that fails is gate trouble quoting git's output. A git
//     directory holding MERGE_HEAD, CHERRY_PICK_HEAD, REVERT_HEAD,
//     sequencer/, rebase-merge/ or rebase-apply/ is refused as gate
//     trouble: git commit would make a merge with the parent MERGE_HEAD
//     names (an agent's forgery), or take another commit's message.
//   - The commit gate commits only work on top of where the agent's
//     session began: HEAD is recorded before each session, and a HEAD
//     that no longer descends from it after the session (an agent's `git
//     reset --hard HEAD~1`, which drops a commit from the user's branch)
//     — or, with --sandbox, an agent's private checkout whose HEAD does
//     not (RunResult.Checkout: its reset rewrote the tree's files, and
//     the commit would land as a revert of earlier work) — is task
//     trouble with status head_moved, before the verifier; nothing is
//     committed (ErrHeadMoved). It is checked again after the test
//     command, as gate trouble. Plan and prompt mode's commits are
//     refused the same way.
//   - <promise>FAILURE</promise> ends the run (exit 7). The claimed task is
//     released, unless the same text also says <task-failed> or
//     <task-done> for it, which are applied first.
//   - If the agent moved its task itself (`ralph task done` inside the
//     session), the loop leaves the store's state as it is.
//   - The task summary logged on completion is the agent's final text
//     without sigils, on one line, at most 500 bytes (its end).
//   - Verification: the verifier uses the iteration's strategy model, runs
//     under the same iteration number, and records a receipt of mode
//     "verify". Verifier crashes are agent trouble; a verifier usage limit
//     is a wait (the claim is released and the iteration redone). What it
//     writes is undone: see "Verification" below.
//   - Usage limits: a wait never counts as an iteration; consecutive waits
//     may together last at most MaxWait, beyond which the run ends as with
//     the stop policy (OutcomeUsageLimit). The reset time is formatted in
//     the zone the runner gave it.
//   - MaxCost counts the cost of this run's sessions only.
//   - Model strategies: fixed without a model is sonnet; a model with a
//     strategy other than fixed is a configuration error. cost-optimized
//     reads "error signals" as a retried task or a fail, retry, release or
//     lease-expired entry among the task's last 5 log entries, and "3+
//     clean completions" as the last three iterations of this run.
//     escalate climbs one rung per troubled iteration and resets to the
//     hinted model's rung after a hinted iteration. A hint is spent by the
//     next session that actually runs (a usage-limit wait keeps it).
//   - Peek mode (ClaimAgent) sends "/ralph-build <peek>" (PromptPeek), a
//     Claude Code custom slash command; the runner of an agent that does
//     not know them sends the command's text instead (ExpandSlashCommand).
//     The peek shows PeekLimit (10) claimable tasks. Nothing
//     claimable is OutcomeComplete (exit 0), even with blocked or failed
//     tasks. A peek error spends the iteration. After a
//     clean session, tasks the agent still holds are failed with
//     ReasonSessionExited; after agent trouble they are released instead
//     (agent trouble never fails a task). Gates run after every clean
//     session; the commit title lists the shown tasks that are now done.
//     Verify is refused in peek mode (a configuration error): the agent
//     closes its tasks itself, so there is no point to check before.
//   - Blocked: nothing ready in scope and something still open or held by
//     another agent. A loop does not wait for other agents' work.
//   - Logs: the session log (SessionLog) is written when
//     Config.SessionLog is set, at <LogDir>/<Session>.log; raw streams go
//     to <LogDir>/<Session>/iter-<n>.ndjson (iter-<n>-verify.ndjson for the
//     verifier) when Config.RawLogs is set; an iteration run again after
//     a usage-limit wait has the same LogPath, and the runner appends, so
//     the file holds every attempt in order. Session names are
//     session-YYYYMMDD-HHMMSS in UTC. A run never shares or overwrites
//     another's log: when the name for its start is taken (a log or a
//     raw-log directory of that name exists), it takes the next free
//     second's name, at once, without sleeping, so names keep the pattern
//     and may run a few seconds ahead of the start. The name is claimed
//     atomically (the session log created with O_EXCL, or the raw-log
//     directory with mkdir), so runs in other processes cannot take it
//     too. A Config.Session given by the caller is used as it is.
//   - Event log: with the session log goes its machine-readable twin,
//     <LogDir>/<Session>/events.jsonl (EventLog): one JSON line per note
//     (transitions left out), written whole and unbuffered so that a
//     watcher (ralph serve) sees each line as it comes; agent text is cut
//     to 1,000 bytes and tool input to 300. The workers of a parallel
//     build share it like the session log. Its errors, opening included,
//     never stop a run: SessionLog.Close returns the first, and one that
//     kept it from opening is a notice at the start.
//   - No link followed (ARCHITECTURE.md §7). The logs lie where an agent can
//     write, so they are reached through package safefile from the
//     project root (from LogDir itself when it lies outside Root), one
//     component at a time: a .ralph, .ralph/logs, session directory, raw
//     stream, session log or event log that is a symbolic link — even one
//     that stays inside the project — is refused, never followed, and a
//     log ralph appends to must have a single name (no hard link to a
//     file elsewhere). What happens then: at the start of a run (.ralph/logs
//     a link), the run does not start and the error names the link; a
//     clock-made session name whose log is a link is taken, and the next
//     second's name is used; a caller-named session's log that exists is
//     removed (a link removed, not followed) and made anew; an event log
//     that is refused is a notice, and the run goes on without it; a raw
//     stream refused (RunRequest.LogRoot, RunResult.LogErr) is a notice
//     in the terminal and the session log, and the session runs with its
//     stream decoded but not logged — losing one raw stream is better
//     than stopping the plan. Prompt overrides, skills (SKILL.md), specs
//     and a feature's spec and plan notes are read the same way; a link
//     among them is an error naming it (the run stops, or does not
//     start): a prompt built without a file the user meant it to have is
//     worse than a stop, and one linked to a secret (~/.ssh/id_rsa,
//     .ralph/db.json) would send it to the model's API.
//   - Prompts: build.md, verify.md, peek.md, plan.md and prompt.md are
//     embedded and can be overridden by <root>/.ralph/prompts/<name>.md.
//     Overrides are checked when the run starts: a field that PromptData
//     does not have, at any depth the checker can follow (with, range, $),
//     is an error naming it, and missingkey=error is set for the rest.
//   - System prompts. Every session (build, verify, peek, plan, prompt)
//     also gets a system prompt, RunRequest.SystemPrompt, rendered from
//     system-<mode>.md (SystemPromptName) with the same PromptData as its
//     user prompt, embedded and overridable the same way. It holds ralph's
//     agent protocol for the mode: what ralph is, that only the final
//     message is read and which sigils count there (build and peek:
//     task-done, task-failed, next-model, FAILURE; verify: verify-pass,
//     verify-fail; plan: COMPLETE, FAILURE; prompt: FAILURE), `"$RALPH_BIN"
//     task …`, one task per session, the RALPH_* variables, and leaving
//     commits to ralph. One template per mode, because the protocols
//     differ and an override of one should not have to branch on the
//     mode. The task context (task, blockers, retry reason, specs, the
//     ad-hoc prompt) stays in the user prompt on standard input; the
//     embedded user prompts still end with a short "how to finish" naming
//     the task's id, so an override of only the system prompt loses
//     nothing essential. The loop asks runners to append the system
//     prompt to the agent's own (RunRequest.ReplaceSystemPrompt unset).
//   - Stores that keep their own books: a store that is a Finisher (a
//     progress file: RALPH_DONE, or every box ticked) is asked Done before
//     the first iteration and after each one, and a true ends the build run
//     as OutcomeComplete (exit 0) even with tasks open. A store that is an
//     IterationRecorder gets an IterationRecord after every counted
//     iteration, in every mode, with TasksCompleted counted from the
//     store (the agent may finish several tasks in one session); an error
//     there is a notice, as for receipts.
//
// # Claims, holders and what becomes of a claim (ARCHITECTURE.md §2.2)
//
//   - The loop claims with its Holder (Config.Holder, this process by
//     default) and ClaimLoop; it renews the held claim every third of the
//     lease from the claim until its outcome is recorded — through the
//     session, verification, the gates and durable retries — and moves it
//     as Actor{Agent, Loop, Generation}, so that an outcome from a claim
//     that ended meanwhile is refused (ErrStaleClaim) rather than applied.
//   - Who may move a task is one function, CheckMove, that every store
//     applies inside its transaction; LoopHeld says which claims only their
//     loop moves (ReleaseAgent leaves those too).
//   - A claim found gone after a session (claimLost): back to pending is
//     task trouble, counted by claiming the task again (at most once) and
//     retrying or failing it with a reason naming who released it; done or
//     failed by someone else, or held by another claim, is noted and left.
//   - Outcomes of finished work (complete, fail, retry) go through settle:
//     errors a store marks Temporary() are retried with backoff, 50 ms
//     doubling to 2 s, until the lease that stood at the first failure
//     runs out; then the run stops with OutcomeError (exit 1) naming the
//     task and the outcome, IterNotRecorded, and the agent's final text in
//     the session log.
//   - Nothing ready but tasks in progress in scope (waitForAgents): the
//     loop waits, saying which tasks and holders once per change, until
//     the store changes (ChangeWatcher, else a look every second), a lease
//     runs out or a holder on this host dies; it stops as blocked only
//     when nothing is held. Claims its own agent made beside its task are
//     released rather than waited for. In peek mode an empty
//     peek ends the run (exit 0).
//   - A store that marks tasks done its own way (DoneMarker: a progress
//     box the agent ticked) has that mark taken as the done sigil.
//
// # Plan mode (Plan, `ralph plan [N]`)
//
//   - Specs are <root>/specs/*.md in name order, then the spec of every
//     feature the store knows (a FeatureStore), in the order the features
//     were added; with Scope.Feature, that feature's spec file only. Every
//     specs/*.md with non-blank content is a spec, even a lone heading
//     ("# Spec: make a thing" names what to make); blank files are
//     skipped. A feature's spec that is missing, blank or byte for byte
//     FeatureSpecStub — what `ralph feature add F` writes without --spec —
//     is no spec: the user has not written it yet, and a planner given
//     only a title would invent the feature. A feature's spec is a
//     SpecFile with Feature set and Plan holding the feature's plan file
//     (empty when missing, blank or FeaturePlanStub); the plan prompt
//     heads it "(feature F)" and tells the planner to give its tasks
//     --feature F. A feature whose spec path is one of specs/*.md is listed
//     once, as the feature's. No specs: Plan returns OutcomeNoPlan (exit
//     2) at once with a message naming specs/*.md, `ralph feature add NAME
//     --spec FILE`, and the spec files of features that have none yet; no
//     agent runs, nothing is written. Specs are read once, when the run
//     starts.
//   - Each iteration is one session with the plan prompt; the agent adds
//     tasks with `$RALPH_BIN task add` and `task dep add`. The loop claims
//     nothing (no RALPH_TASK_ID) and reads only the final text: FAILURE is
//     exit 7, COMPLETE ends the run after the iteration. Agent trouble and
//     usage limits are handled as in build mode.
//   - COMPLETE is believed, since planning has no database truth to check
//     it against, except that an empty plan is never success: COMPLETE, or
//     the iteration limit, with no task in scope is OutcomeNoPlan (exit 2,
//     "nothing to do" for the build that would follow). Without
//     Scope.Feature the scope is the whole plan, features' tasks included,
//     so a run that planned only features' tasks is not empty. The limit with
//     tasks planned is OutcomeLimitReached (exit 0); the message says how
//     many tasks the plan has and how many this run added.
//   - MaxIterations 0 is DefaultPlanIterations (5); PlanConfig starts from
//     it. The model rules are build mode's (no model: cost-optimized, which
//     is sonnet here).
//   - No test gate (a configured test command is a configuration error:
//     planning changes no code), no verify, no peek mode, no task scope.
//     With Commit, files the session changed outside .ralph/ are committed
//     as "plan: iteration <n> - plan from specs/a.md, feature F, …" (or
//     "plan feature F" with Scope.Feature); nothing changed is normal (tasks live in .ralph/), and git
//     failures are gate trouble as in build mode (exit 5 past the retries).
//
// # Prompt mode (RunPrompt, `ralph prompt FILE`)
//
//   - One session, iteration 1, with the RALPH_* environment (no
//     RALPH_TASK_ID), the session log and the raw stream of a build
//     iteration, and a receipt of mode "prompt" when PromptParams.Receipts
//     is set. No task, no completion check, no test gate, no verify. Of
//     the sigils only <promise>FAILURE</promise> is read (prompt exits
//     with build's codes): the run ends OutcomeFailure (exit 7) and,
//     with Commit, nothing is committed — the agent says its work is not
//     fit to keep, so what it changed stays in the working tree for a
//     person to judge. Task sigils, COMPLETE and <next-model> are ignored.
//   - The file is not a template: the prompt.md template (embedded: exactly
//     "{{.Prompt}}") wraps it, so an override can add a house preamble with
//     the usual variables while {{ }} in the file reaches the agent as is.
//   - Agent trouble (crash, is_error, timeout, no result) is exit 4 at once:
//     re-running a prompt that may have half-applied its changes could apply
//     them twice. A usage limit waits and runs the prompt again (not a new
//     iteration), as build mode does; with the stop policy or a reset past
//     MaxWait it is exit 10. Cancellation is exit 130.
//   - With Commit: outside a git repository exit 5 before the agent runs;
//     changes are committed as "prompt: iteration 1 - <title>" (the title
//     is PromptParams.Title, else the prompt's first non-blank line without
//     heading marks, at most 72 bytes); nothing changed is a notice, exit 0;
//     a failing commit is exit 5.
//
// Cost of the two modes, ralph's own time around the agent (medians of
// five runs of `go test -run '^$' -bench 'BenchmarkPlan$|BenchmarkRunPrompt$'
// -benchtime 1s -count 5 -benchmem ./loop/` on a shared, loaded 2-core
// Xeon; runs spread 0.67–0.97 ms and 71–149 µs), the system prompt's
// rendering included: a whole plan run of one session over 20 specs of
// 4 KB and 1,000 tasks, 0.87 ms (763 KB, 667 allocs; reading the specs and
// rendering the 80 KB prompt are most of it); a whole prompt run of a 4 KB
// prompt without logs, 84 µs (50 KB, 155 allocs). A session lasts minutes.
//
// # Verification (Config.Verify, `ralph build --verify`)
//
// The verifier is offered read-only tools, but Bash writes anything, so
// The loop's promise — the working tree after verification is exactly
// what it was before, ignored paths aside, and a verifier that changed
// files has its verdict discounted — is kept after the fact: a snapshot
// that is restored. A read-only mount would need root,
// bubblewrap or a per-OS sandbox profile, and would make the verifier's
// own test runs fail wherever they write outside ignored paths; a
// snapshot is portable (Linux, macOS), needs no privileges and lets the
// verifier work normally.
//
//   - What is protected: every file the project's git tracks under Root
//     and every untracked file it does not ignore, as `git ls-files
//     --cached --others --exclude-standard` run in Root lists them — so
//     .gitignore files at every level (those above Root too, when Root is
//     below the repository's top), .git/info/exclude and core.excludesFile
//     hold exactly as for the user's git, and a tracked file that an
//     ignore pattern matches is still protected. Nested repositories and
//     submodules are listed by the private repository below, with the
//     nested directory as its work tree (the .gitignore files in it and
//     the user's core.excludesFile hold; the nested repository's index,
//     info/exclude and configuration do not): the guard never runs git
//     with a nested repository's configuration, where an agent can plant
//     core.fsmonitor without writing to the project's .git. Outside any
//     repository the same rules are applied by the private repository
//     (.gitignore files under Root, core.excludesFile). Root's .ralph/ and
//     every .git are left out; regular files and symlinks count, with
//     their content, executable bit and link target; other file types and
//     empty directories do not.
//   - How: the listed files are hashed into a private git directory,
//     <Root>/.ralph/verify-snapshot.git (git plumbing with --git-dir and
//     --work-tree=Root: update-index, write-tree), giving one tree id for
//     the whole tree. Its index is a stat cache: only files whose stat
//     data changed are read again, so a snapshot costs about what `git
//     status` does. After the session (whatever its end: verdict, crash,
//     timeout, usage limit, cancellation) the tree is snapshotted again;
//     equal ids mean nothing changed. Otherwise `git diff-tree` names the
//     changes, added files are removed with the directories that held
//     nothing else (empty directories are not part of the tree, so one
//     that was empty before and got a file is removed too), `git
//     read-tree -m` + `git checkout-index -f` write changed and deleted
//     files back, and the tree is checked again, up to three rounds (an
//     edited .gitignore, once restored, uncovers the files it hid).
//   - Why git: it is installed wherever ralph works, it already knows the
//     ignore rules, file modes and symlinks, its stat cache makes an
//     unchanged tree cheap, and its object store keeps the contents a
//     restore needs. The private directory is ralph's own: the project's
//     repository, index and objects are never written to take a snapshot
//     (its listing runs with GIT_OPTIONAL_LOCKS=0; what a verifier changed
//     there is put back, below), and the project's .gitattributes cannot
//     turn on filters or line-ending conversions (info/attributes unsets
//     them), so files come back byte for byte. The store holds a
//     .gitignore of "*", so the project's git never sees it, even where
//     .ralph/ is not ignored (an agent's `git add -A` must not commit a
//     copy of the tree). Blobs go into packs (one per snapshot that finds
//     new content), which a run's end merges when there are more than 16;
//     loose objects no index holds are pruned after a day. Each run uses
//     its own copy of the index, handed on when it ends, so runs never
//     contend for a lock and a killed run's lock never blocks the next.
//   - The store lives in .ralph/, where an agent without --sandbox can
//     plant links (its ignore file to ~/.bashrc, objects/pack to a
//     directory elsewhere): ralph makes it itself (HEAD, config, info/,
//     objects/, refs/; no git init, no hooks) and checks it before each
//     use, walking it without following links: no symlink, device, pipe,
//     socket or hard-linked file anywhere, no hooks, alternates, grafts,
//     shallow, commondir or worktrees, and the files ralph wrote as it
//     wrote them. A store that fails before a session is made again (it
//     is a cache); one that fails after the session (the verifier planted
//     something) has what failed removed, without following it, its
//     files written again, and counts as a change the verifier made.
//     The store is reached from the project root and ralph's own files
//     go into it through package safefile (no link followed on the way
//     or at the name), each as a new file renamed over the old, so no
//     link at the name and no hard link to a file elsewhere is written
//     through; the repository's files are put back the same way. What remains without --sandbox:
//     another agent running at the same moment (a worker's) could plant a
//     link between the check and git's own writes.
//   - Beside the tree: before the session the guard also records the
//     repository's refs (every branch, tag, remote-tracking ref, stash,
//     note; symbolic refs as such), HEAD, the index (its content, `git
//     ls-files --stage`: a refresh by the verifier's `git status` is no
//     change), the hooks directory, config and config.worktree, info/
//     (exclude, attributes, sparse-checkout, grafts),
//     objects/info/alternates, shallow, a lock file the session leaves
//     (index.lock, HEAD.lock), the state of an operation in progress
//     (MERGE_HEAD, MERGE_MSG, CHERRY_PICK_HEAD, REVERT_HEAD, ORIG_HEAD,
//     AUTO_MERGE, SQUASH_MSG, sequencer/, rebase-merge/, rebase-apply/,
//     BISECT_*: a forged MERGE_HEAD would make the next commit a merge
//     with a parent of the verifier's choosing), a linked tree's
//     commondir and gitdir, and ralph's own files under <Root>/.ralph —
//     prompt overrides, skills, features' spec.md and plan.md (which go
//     into the next prompt), worktree-include, and anything else there but
//     what ralph writes itself while the verifier runs or guards on its
//     own: logs/, the store's files (progress.db*, db.json*), worktrees/
//     and verify-snapshot.git — with the directories opened before the
//     session. After
//     it, what differs is put back before the tree is compared (the
//     config and info/exclude decide what the tree listing sees): refs
//     with one `git update-ref --stdin` transaction (and `git
//     symbolic-ref`), files without following links. Each such change
//     counts as a change of the tree does; it is named by its ref or its
//     path from Root (refs/tags/v1, .git/hooks/pre-commit,
//     .ralph/prompts/build.md). With workers, the verifier runs in its
//     tree while other workers' integrations move ralph's own refs: a
//     Workspace that is a RefOwner names them (package parallel: the
//     integration branch, refs/heads/ralph/…, the remote's tracking refs)
//     and the guard neither counts nor undoes their moves; a Workspace
//     that is none owns refs/heads/ralph/. Two verifiers at once in one
//     repository (two workers) each record the shared directories: a
//     hook one plants may be undone by the other's check, and counted
//     against it.
//   - What a change does: the paths (at most 10 named, then "and N more")
//     go into a task log entry of kind LogVerify ("the verifier changed
//     files (restored): a.txt, b/c.go") and a notice, and the verdict
//     does not count: a pass becomes a fail with that reason (task
//     trouble, as <verify-fail>), the verification status and the
//     receipt's verdict are "fail". A session that ended in trouble stays
//     agent trouble, a usage limit a wait; the tree is restored either
//     way.
//   - Failures: no git on PATH stops the run before its first claim with
//     ErrVerifyNeedsGit (exit 1). A snapshot that fails before the session
//     (the store may have been damaged by an earlier verifier: it lives in
//     the tree) rebuilds the store once, then stops the run with
//     ErrVerifySnapshot without running the verifier. A tree that cannot
//     be put back stops the run with ErrVerifyRestore naming the paths: a
//     tree ralph cannot vouch for must not be built on.
//   - Limits: one verifying run per working tree at a time (a restore
//     puts back the tree as it was before the session, so what another
//     run's agent wrote meanwhile would be undone too; runs in separate
//     worktrees are separate trees). The verifier can still change what
//     is neither the working tree nor what the guard records above:
//     objects (unreachable ones are harmless), reflogs, ignored files,
//     the rest of .ralph/, and anything outside Root. A repository the
//     verifier creates inside the tree keeps its .git (its files are
//     removed).
//
// Cost, ralph's own time per verification on a tree of 10,000 files of
// 1 KB (medians of three runs of `go test -run '^$' -bench
// BenchmarkTreeGuard -benchtime 2s -count 3 -benchmem ./loop/` on a
// shared 2-core EPYC VM with a slow disk; an earlier session under
// heavier load measured up to 1.8 times these): the two snapshots of a
// verifier that changed nothing, 133 ms in a git repository and 175 ms
// outside one; with one file changed and restored, 268 ms and 337 ms; the
// first snapshot of a project (an empty store: every file read and
// stored), 1.06 s and 1.30 s — 8.6 s and 5.2 s when each blob was a loose
// object, as git writes them by default, hence the packs. A verifier
// session lasts minutes.
//
// # Workers (Config.Workspace and Config.Shared, ARCHITECTURE.md §5)
//
// A run can be one worker of a parallel build (package parallel runs the
// pool). With a Workspace, the agent, the test gate and the verifier work
// in the worker's tree (Workspace.Dir, given to the agent as
// RALPH_WORKTREE and in the prompt's .Root), each claimed task begins
// there from the integration tip (Workspace.Begin: a task whose work has
// landed already is completed without an agent), and a done task — after
// verification and the test gate in the tree — is completed only once
// Workspace.Integrate landed it. Work that cannot land (an
// *IntegrationError) is task trouble with status integration_failed; a
// claim that ended meanwhile is a lost claim; any other failure is a git
// failure (exit 5). The commit gate is not used: integration commits. The
// verifier's snapshot store is .ralph/worktrees/<worker>.verify.git. A
// Workspace that is a Noticer has its messages sent as notices after each
// Begin (a tree found broken and set aside, with where it went).
//
// With Shared, the workers share the iteration budget (a slot is taken
// before each claim; iterations are numbered across workers in the order
// their claims succeed), the cost budget, a usage-limit pause (each worker
// waits once for each pause), the session log (each worker's lines start
// "[wK] ") and the first stop with exit code 1, 3, 4, 5, 7, 9 or 10, which
// ends every other worker before its next claim. What a worker owns — its
// claim, trouble streaks, model hint, tree — stays in its run. Raw streams
// are <session>/wK-iter-N.ndjson and receipts carry the worker.
//
// # Prompt templates
//
// Every template gets a PromptData; a mode's system prompt gets the same
// one as its user prompt. What each mode fills:
//
//	variable                 build  verify  peek  plan  prompt
//	.Mode                    build  verify  build plan  prompt
//	.Iteration .AgentID      yes    yes     yes   yes   yes (1)
//	.Root .RalphBin          yes    yes     yes   yes   yes
//	.Task (.ID .Title        yes    yes     -     -     -
//	  .Description .Priority
//	  .RetryCount …)
//	.Parent (a *Task)        yes    yes     -     -     -
//	.Blockers (.Task         yes    -       -     -     -
//	  .Summary)
//	.Retry (.Count           yes    -       -     -     -
//	  .MaxRetries .Reason)
//	.Feature (.Name .Spec    yes    -       -     yes   -
//	  .Plan)
//	.Specs (.Path .Content   -      -       -     yes   -
//	  .Feature .Plan)
//	.Skills (.Name           yes    -       -     yes   yes
//	  .Description .Path)
//	.Peek                    -      -       yes   -     -
//	.AgentText               -      yes     -     -     -
//	.Prompt                  -      -       -     -     yes
//
// The spec and plan of a task's feature are .Feature.Spec and
// .Feature.Plan (contents, empty when the file is missing); in plan mode
// the specs being planned are .Specs (a feature's spec has .Feature, its
// name, and .Plan, its plan notes), and .Feature is set with --feature.
// A field a mode does not fill is its zero value (nil pointers and empty
// lists are false in {{if}} and {{with}}). A variable PromptData does not
// have is an error naming it when the override is loaded.
package loop
