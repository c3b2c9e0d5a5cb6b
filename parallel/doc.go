// Package parallel runs a build with several workers (ralph build --workers
// N, ARCHITECTURE.md §5): each worker a loop.Run in a git worktree of its
// own, done meaning merged into one integration branch per plan.
//
// The pool (Run) and the integration step (the workspace, a
// loop.Workspace) are loop policy over a small seam, Git, whose real
// implementation, ExecGit, runs the git binary; the tests drive the policy
// over a fake Git in memory, and ExecGit against real repositories.
// Package gittest holds both to one contract (gittest.TestGit, every
// method of the seam), and ExecGit to the trust rules of ARCHITECTURE.md §7 (no
// program the repository's configuration names runs in any method; git
// runs with explicit directories, never through a .git file the agent
// rewrote), so that neither a fake that drifts from git nor a change of
// the seam can drop them. The seam keeps only what the policy asks
// (Head is Resolve of "HEAD", attempt branches are read from Branches);
// its other methods each answer a question no other one does, and the
// worktree and remote ones carry the ARCHITECTURE.md §7 checks (CheckWorktree,
// RepairWorktree, SetAside) that a merged method would blur.
//
// # Decisions
//
//   - Clean (ralph clean) calls a branch landed when git cherry finds
//     every commit of it patch-equivalent to one of the integration
//     branch — landings rebase, so the landed commit is a copy, never the
//     branch's own — or when its tip is an ancestor of the integration
//     branch: an attempt branch of a task now done is then removed unless
//     it holds other work. A tree counts as used while a build holds its
//     lock (takeTree), and Clean takes that lock itself while it looks.
//   - Worktrees live in <root>/.ralph/worktrees/wK: inside the project, so
//     that they go where the plan goes and never land beside someone
//     else's directories; the directory holds a .gitignore of "*", so the
//     project's git status never lists them, whether or not .ralph/ is
//     ignored. A tree is made on first use (detached at the integration
//     tip) and reused by later builds. A build holds each of its trees by
//     a lock on <tree>.lock (flock, released with the process): a second
//     build of the project at the same time takes the next free trees, so
//     its workers may be w3 and w4. A directory of trees that is a
//     symbolic link is refused (ralph follows no link an agent may have
//     planted).
//   - Rebase, not merge: each task lands as one commit on a linear
//     integration branch — the agent's own commits on top of the attempt's
//     base are folded into it — whose message ends with the trailers
//     "Ralph-Task: <id>" and "Ralph-Generation: <n>", for people to read.
//
// # Only ralph moves the integration branch (ARCHITECTURE.md §7)
//
//   - Landings are recorded by ralph (loop.LandingStore): right before the
//     branch moves to a task's commit, the store records the landing
//     (branch, commit, the tip it was made on, task, claim generation, and
//     how often the task had been recorded done); after the move it is
//     confirmed, and the store's record of where ralph last put the branch
//     follows. A landing whose move lost its race is made void. A trailer
//     on any other commit means nothing: an agent that puts a commit with
//     "Ralph-Task: t-2" on the branch lands nothing.
//   - After a crash between the move and the confirmation the next look at
//     the branch finds the recorded landing in the branch's history
//     (confirmed: the task is done when next claimed, without an agent) or
//     not (it never landed: void once the branch has moved on from the tip
//     it was made on; until then another process may still be landing it).
//     A task has landed when the branch holds a landing of it recorded
//     when the store had as many completions of it as now: so a task reset
//     after its work landed is worked again (and lands a second commit).
//   - The tip is checked — when a build starts, when an attempt begins, on
//     every round of an integration and when a run would end — against where
//     ralph last put it: the branch must be there, or reached from there
//     through landings ralph recorded (its own, another process's, another
//     machine's on the shared store: ARCHITECTURE.md §6). The recorded tip is
//     read before the branch, so that a landing under way elsewhere (the
//     branch moved, the store not yet told) reads as the landing it is.
//     Anything else — a commit ralph did not make, a rewind, a deletion —
//     stops the build with exit 5 (a *TipError) before any agent runs on it,
//     naming the commit, the tasks named by trailers of commits ralph did not
//     make, the tasks whose landed work the branch lacks, and the one step
//     that accepts it: ralph build --accept-tip (Config.AcceptTip), which
//     records the tip as where ralph last put the branch, drops the landings
//     it lacks and sends their done tasks (and done ancestors) back to
//     pending, logged loop.LogReopen as the person's move. A plan adopted
//     before ralph recorded tips takes the tip it has as its first.
//   - A branch deleted after every landing on it reached HEAD (a merged pull
//     request whose branch was deleted; HEAD is what the branch was made
//     from) is not a foreign move: it is made again from HEAD. One deleted
//     while HEAD lacks landed work stops the build like a rewind; accepted,
//     it is made again from HEAD.
//   - Branches that are not ralph's which move or go during a run (an
//     agent runs as the user without --sandbox) are not followed or
//     undone: ralph writes none of them, and says at the end which moved
//     (Report.Warnings).
//
// # The integration branch follows its base
//
//   - The base is the branch the integration branch follows, recorded
//     with the plan (SettingBase): Config.Base (ralph build --base), or
//     the branch HEAD is on when a build first finds none recorded — on
//     the plan's first parallel build, the branch the integration branch
//     is made from. A HEAD that is detached, or on the integration branch
//     or one of ralph's own, records none and nothing is followed. Another
//     Config.Base than the recorded one is refused (an *IntoError,
//     IntoBaseRecorded).
//   - Every build, once the tip is checked and before any tree is made or
//     readied from it, merges the base's new commits into the branch: one
//     merge commit ralph makes in memory (git merge-tree, git
//     commit-tree: no tree is written), parents the tip and the base's
//     tip, recorded as a landing of BaseTask before the branch moves to it
//     (by compare-and-swap, or a push that only fast-forwards) and
//     confirmed after — so the tip check explains it as it explains a
//     task's landing. Landed work is never rebased. With Config.Remote the
//     base is the remote's branch, fetched. Report.BaseMerge names the
//     merge, and a notice says so.
//   - A conflict stops the build before any agent (OutcomeGitFailed, a
//     *BaseConflictError in the message) with the commands that merge by
//     hand in a worktree of their own (MergeDir), so that the person's
//     tree and checked-out branch stay as they are. The next build takes
//     that merge as the branch's tip: a commit whose first parent is
//     where ralph last put the branch (or follows from there by its
//     landings) and whose second is in the base's history and new to the
//     first is recorded as a landing of BaseTask. Nothing else a person
//     commits there is (a *TipError, as before).
//
// # The agent's tree
//
//   - After each agent session that reports done (before the verifier or
//     the test gate runs there: loop.TreeChecker) and before ralph runs
//     git in a worker's tree, ralph checks, following no link, that it is
//     the worktree ralph made (Git.CheckWorktree): a real
//     directory whose .git file names the git directory the repository
//     keeps for it, which names it back (hostgit.Repo.Linked: the record
//     every git command ralph runs there is given), in the directory of
//     trees the build found (not replaced since). A tree that is not is set aside
//     whole — a link is moved, never followed — to <tree>.aside/<time>,
//     and the worktree made again at the integration tip; when only its
//     .git is broken (rewritten, a link, a repository of the agent's
//     own), that .git is moved to <tree>.aside/<time>/.git and the right
//     file written in its place, and the tree's work is kept on an
//     attempt branch as usual. A link planted at <tree>.aside is removed
//     (the link, not its target) and nothing is moved through one; a
//     <tree>.aside that is a file is left as it is, and
//     <tree>.aside-<time> used instead. A tree whose .git cannot be
//     repaired is set aside whole and made again, and so is one an agent
//     locked (git worktree lock): a tree ralph cannot use never stops a
//     build. Found
//     after an attempt, it is task trouble naming what was wrong and
//     where the tree went; found when an attempt begins, when the build
//     starts or when it ends, a notice of the worker's (loop.NoteNotice,
//     in the session log and to the observer) says so, with the path.
//     The user's working tree and checked-out
//     branch are never written, whatever the agent did.
//   - The agent's HEAD: let S be the commit the attempt began from and E
//     where the agent's HEAD ended (loop.Checkout's End when the runner
//     reports one — a sandboxed agent's private checkout —, else the
//     tree's own HEAD). E is S or descends from it: the tree is landed
//     against S, the agent's commits folded in. E is an ancestor of S (git
//     reset backward): the agent's changes since E — the tree against E —
//     are replayed onto S by a 3-way merge (git merge-tree), a conflict
//     being task trouble; nothing of its own is done without a commit.
//     Anything else (a checkout of another commit, a rebase, an amend, an
//     orphan branch, a commit the repository lacks) is task trouble naming
//     what the agent did, its work kept on an attempt branch. So a git
//     reset --hard HEAD~1 never lands as a revert of work already landed.
//
// # Other decisions
//
//   - Right before the branch moves, the claim is checked again (a replay
//     and its test gate take time) and so is every worktree: a branch
//     someone checked out meanwhile is not moved (exit 5). ralph writes
//     HEAD detached: a branch an agent checked out in its tree is never
//     moved by ralph.
//   - A git repository an agent makes inside its tree (git init, a
//     scaffolding tool) would be committed as a gitlink with none of its
//     files: integration refuses it as task trouble naming it, and the
//     tree's keeper moves it aside whole, to <tree>.nested/<time>/<path>.
//     Readying a tree never deletes such a repository.
//   - Config.Into (ralph build --into) must be a branch name git takes,
//     and not ralph, ralph/task/… or ralph/attempt/… (ralph's own).
//     Nothing is recorded with the plan until every check of the build
//     has passed.
//   - Task ids in branch names: letters, digits, '-' and '_' stay, every
//     other byte is %XX (RefName): "fix bug/3" → ralph/task/fix%20bug%2F3.
//   - Trees work on a detached HEAD; ralph/task/<id> is made at the
//     integration tip when an attempt begins and moved to the attempt's
//     commit when it lands (a failed attempt's commit is on its attempt
//     branch), and is never checked out, so that any worker can take up
//     any task after another worker's attempt failed.
//   - Kept attempts: a failed attempt's commit (a conflict, a test gate
//     that failed after the rebase, or work left when the task went back
//     to pending for any other reason) is kept as ralph/attempt/<id>/<n>,
//     n counting from 1; work not committed in a tree (a killed worker) is
//     committed first. The file <tree>.task names the task of the attempt
//     under way, for a build that finds the tree after a crash. ralph never
//     deletes a branch.
//   - Serialisation: integrations of one ralph process take turns; those
//     of several processes are kept apart by the compare-and-swap of the
//     integration branch (git update-ref NEW OLD), a lost race being
//     replayed onto the new tip; those of several machines by the
//     remote's (below).
//   - .ralph/worktree-include lists paths or globs (one a line, '#'
//     comments), relative to the project, of files copied into each tree
//     where missing — typically ignored ones such as .env — and never
//     committed from it. No link is followed either way (ARCHITECTURE.md §7;
//     package safefile, from the project root): a source that is a
//     symbolic link, or lies below one, is an error naming it when the
//     build starts (list its target, or copy the file into the project);
//     a copy is created anew (O_EXCL), never written through: a file the
//     agent left at the destination stays as it is, and a symbolic link it
//     put there, or in place of a directory on the way, is removed (the
//     link, not what it points to) and the file copied anew — git ignores
//     such a link, and it would stay in the tree for good; a link swapped
//     in meanwhile is refused, an error naming it. The <tree>.task marker,
//     the worktrees directory's .gitignore and the trees' lock files are
//     written the same way. --setup runs with sh -c in each worker's tree
//     before its first agent of each build (RALPH_DIR, RALPH_WORKTREE and
//     RALPH_WORKER set), through Loop.Commands: with --sandbox in the
//     agent's sandbox, where it writes that tree and a temp directory
//     only (caches in the home directory are read-only there); it should
//     make ignored files (dependencies):
//     changes it makes to tracked files are undone when an attempt begins.
//     A failing setup is gate trouble: tried 1+MaxRetries times, then the
//     run stops with exit 3.
//   - A build that asks for no workers (ralph build without --workers,
//     Build with Config.Workers 0) of a plan that has an integration
//     branch runs as one worker (w1): once a plan integrates into a
//     branch, every build of it does. Workers holds that rule, and Build
//     applies it: Run in worktrees for such a plan, one loop.Run in the
//     checkout for any other, so a program embedding the library builds
//     a plan as ralph build does. CheckLoop is the rule that workers
//     take neither peek mode nor Loop.Commit, which Run checks first.
//   - Git on the host runs no code an agent planted (ARCHITECTURE.md §7): every
//     command ExecGit runs is built by package hostgit, with GIT_DIR,
//     GIT_COMMON_DIR and GIT_WORK_TREE fixed — the repository found from
//     Root when ExecGit is first used, a worker's tree found from the
//     common directory's own record of its linked trees, never from the
//     .git file an agent can rewrite in its tree — and every program the
//     repository's own configuration names (hooks such as
//     reference-transaction and post-checkout, core.fsmonitor, filters a
//     committed .gitattributes sends files through, merge drivers,
//     credential helpers, …) blanked, the user's global ones kept. No
//     command looks inside a nested repository, whose configuration was
//     never read: Commit stages with hostgit's StageAll (git diff-files
//     --ignore-submodules=dirty, ls-files, update-index) instead of git
//     add, which runs git status in every submodule, and Status and the
//     rebase's conflict listing pass --ignore-submodules=dirty. A merge
//     driver the repository names is a conflict ("exit 1"), so work whose
//     files it covers cannot be replayed onto a moved tip: task trouble.
//   - The verifier of a worker runs in its tree while other workers land
//     their work. Its guard (package loop) puts back the refs, hooks,
//     config and prompt overrides the verifier changed; the workspace
//     is a loop.RefOwner naming what other workers move meanwhile — the
//     integration branch, refs/heads/ralph/…, and with a remote its
//     remote-tracking refs — which the guard neither counts nor undoes.
//   - Agent ids: each worker's is the run's agent id with "-wK" appended;
//     receipts, session-log lines ("[wK] …") and raw streams
//     (<session>/wK-iter-N.ndjson) name the worker.
//
// # Several machines: Config.Remote (--remote NAME)
//
// Builds of one plan in several clones of a repository (ARCHITECTURE.md §6: the
// plan on a database server, a ralph build --workers N --remote NAME in
// each clone) share the integration branch through the git remote NAME;
// without Remote nothing here happens and the branch is the repository's
// own.
//
//   - The integration branch lives on the remote. Its tip is fetched
//     (refs/heads/<branch> of NAME into refs/remotes/NAME/<branch>, that
//     one branch, no tags, none of the remote's configured refspecs) when
//     an attempt begins and every time an integration goes round, and
//     checked against the landings every machine records in the shared
//     store, so a task another machine landed is done, not applied again.
//   - A task lands by git push NAME <commit>:refs/heads/<branch> without
//     force: the remote moves the branch only forward, from the tip the
//     commit was replayed onto, and refuses the push if another machine
//     moved it first — its own compare-and-swap ("[rejected]
//     (non-fast-forward)", "(fetch first)", or "[remote rejected]
//     (failed to update ref)" when it moved during the push). A refused
//     push is a lost race, as a lost swap is: fetch, replay onto the new
//     tip, run the test gate again, push again. Any other refusal (the
//     remote's hooks, access, the network) is a git failure, exit 5.
//   - Then ralph/task/<id> is pushed to the remote at the landed commit,
//     without force too: the remote's ralph/task/<id> is only ever pushed
//     so, and a landing is made on a tip that holds every earlier one, so
//     this is a fast-forward (ralph overwrites nothing on the remote).
//     Kept attempts are pushed as they are kept, made on
//     the remote only where it has no branch of that name, so that two
//     machines never take one name: n counts past the remote's
//     ralph/attempt/<id>/<n> too. An attempt is kept in the clone first
//     and then pushed: work is kept even when the remote cannot be
//     reached (and the run then stops, exit 5, saying so).
//   - The local branch refs/heads/<branch> follows the remote's: moved
//     forward to it after every landing and at the end of the run, where
//     it is an ancestor of the remote's and no worktree has it checked
//     out; never moved back or across. The run's end names the branch
//     and the remote, and the merge that takes it from any clone (git
//     pull NAME <branch>). When a build with a remote begins, a local
//     branch ahead of the remote's (work landed by builds without
//     --remote) is pushed there, and a remote without the branch gets the
//     local one — each only when the landings recorded explain the local
//     tip —, or HEAD on the plan's first parallel build; branches that each
//     have commits the other has not are refused (exit 1) until someone
//     merges them.
//   - A holder that lost its claim never lands its work. The claim's
//     generation is checked right before every push of the branch, each
//     time round; and a stale holder whose check passed before it lost
//     the claim (a machine suspended between the check and the push)
//     is refused by the remote itself: the push that lands moves the
//     task's claim fence on the remote with the branch, atomically, and
//     the claim that took over replaced that fence when its attempt
//     began (fence.go). Whichever push reaches the remote, the branch
//     holds the task's work once, the current claim's; a holder that
//     finds the task landed by another claim has the task done (the
//     loop completes it under its own claim, which the store refuses
//     when that claim is the stale one). The stale holder's work that
//     did not land is kept as an attempt branch, here and on the remote.
//   - An unknown remote name is refused before anything runs, as a git
//     failure (exit 5); so is a remote that cannot be reached when the
//     build begins.
//   - Fetches and pushes of one process take turns: each updates
//     remote-tracking refs, and git updates one ref at a time.
//
// # Errors
//
// Run's errors before any worker starts speak of Config's fields, never
// of a command line's flags; a caller tells them apart with errors.Is
// and errors.As and words them for its users (cmd/ralph names --into and
// --commit):
//
//   - *IntoError: the integration branch, or its base (Config.Base),
//     refused, with the branches and the reason (IntoNotBranchName,
//     IntoOwnBranch and IntoBaseInvalid wrap loop.ErrConfig; the others
//     ErrInto).
//   - ErrCommitWithWorkers, ErrPeekWithWorkers: Config.Loop.Commit, or
//     peek mode, does not go with workers (each wraps loop.ErrConfig).
//   - ErrNoSettings, ErrNoLandings: the store cannot record the plan's
//     integration branch, or its landings.
//   - Any other loop.ErrConfig: loop.CheckConfig's.
//
// Texts that reach the caller as words, not as an error it could tell
// apart — a stop's Report.Message (a *TipError's advice, a remote that
// cannot be used), a task's log entry (a tip accepted), a warning (branches
// an agent moved) — name Config's fields, or what Config.Words names them:
// cmd/ralph passes its flags (ralph build --accept-tip, --remote,
// --sandbox), so its output reads as it always has.
package parallel
