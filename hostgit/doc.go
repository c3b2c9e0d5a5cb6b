// Package hostgit builds every git command ralph runs on the host (the
// commit gate, the verifier's snapshot, worktree set-up, integration,
// fetch and push; ARCHITECTURE.md §7.1).
// The agent can write the repository's own configuration and hooks — or,
// under --sandbox, at least the files of its tree — so no command ralph
// runs may carry out a program they name, while the user's own
// configuration (system and global files) keeps working: a global git-lfs
// filter still cleans and smudges. It imports only the standard library,
// so package loop may use it.
//
// # Where the repository is
//
// Find locates the repository from a directory the way git would (the
// nearest .git upwards, a "gitdir:" file, commondir), once, from files
// no agent has touched yet (ralph calls it when a run starts), and every
// command then runs with GIT_DIR, GIT_COMMON_DIR and GIT_WORK_TREE set
// to what it found: a .git file, a commondir file or core.worktree that
// an agent rewrites later changes nothing. Linked working trees (a
// parallel build's workers) are found from the common directory's own
// record of them (<common>/worktrees/*/gitdir, Repo.Linked), never from the
// .git file in the tree, and only where the tree is a real directory (a
// tree an agent replaced by a link to the user's checkout is refused
// rather than worked on). Variables of ralph's environment that would
// send git elsewhere or change how it reads paths (GIT_INDEX_FILE,
// GIT_OBJECT_DIRECTORY, GIT_NAMESPACE, GIT_*_PATHSPECS, … — the list is
// dropped in config.go) are not passed on; GIT_TERMINAL_PROMPT=0,
// LC_ALL=C and an editor that accepts what it is given (true) are set;
// PATH loses its relative (and empty) entries, which would find programs
// in the agent's tree — git itself is looked up in the absolute entries
// only; and every command runs with --no-pager.
//
// # Which configuration counts
//
// git 2.39 cannot be told to ignore the repository's configuration, nor
// (no --attr-source) its .gitattributes, so the rule is by configuration
// scope: every key that names a program is given at command scope
// (GIT_CONFIG_COUNT, which beats every file and, unlike -c, takes keys
// whose subsection holds '=') with the value the system and global
// configuration (and ralph's own -c/GIT_CONFIG_*) give it, or with one
// that runs nothing. Keys given this way whatever the repository says:
//
//   - core.hooksPath: the user's, else /dev/null — no hook in .git/hooks
//     or a directory the repository names ever runs (pre-commit,
//     post-commit, reference-transaction, post-checkout, pre-auto-gc, …).
//     A user's hooksPath that is relative (`hooksPath = .githooks` in
//     ~/.gitconfig) would name a directory of the tree git runs in — the
//     agent's — so it is /dev/null too, and Blanked lists it; absolute,
//     "~/" and "%(prefix)/" paths are kept;
//   - core.fsmonitor=false, submodule.recurse=false (git never goes into a
//     nested repository, whose configuration was not read),
//     protocol.ext.allow=never (ext:: URLs run commands),
//     maintenance.auto=false (no git maintenance or gc --auto after
//     ralph's commands: those would run git again, with none of the
//     command-line options; the user's next git command does it);
//   - core.askPass (the user's, else $SSH_ASKPASS), gpg.program and
//     gpg.<format>.program (the user's, else gpg, gpgsm, ssh-keygen);
//   - core.sshCommand, as GIT_SSH_COMMAND unless ralph's environment has
//     it (the user's core.sshCommand, else $GIT_SSH, else ssh);
//   - credential helpers: an empty credential.helper empties the list,
//     then the user's helpers (credential.helper and
//     credential.<url>.helper) are added again in their order;
//   - core.editor, sequence.editor and pagers: GIT_EDITOR and
//     GIT_SEQUENCE_EDITOR are true, and --no-pager;
//   - core.worktree: GIT_WORK_TREE wins over it.
//
// Keys set for each one the repository's configuration defines (found by
// reading it, below): filter.<driver>.clean, smudge and process ("": no
// filter) and required (false); diff.<driver>.textconv and command, and
// diff.external (""); merge.<driver>.driver ("exit 1": a conflict);
// remote.<name>.vcs; remote.<name>.uploadpack and receivepack (git takes
// the first value it reads, so these are given as --upload-pack or
// --receive-pack to the fetch, ls-remote, pull or push that names the
// remote: the user's value, else git's own program);
// core.alternateRefsCommand (git for-each-ref, as when unset);
// gpg.ssh.defaultKeyCommand; hook.<name>.command (configured hooks of
// git 2.46 and later); core.gitProxy (GIT_PROXY_COMMAND="" unless ralph's
// environment sets it: first match wins, so nothing at command scope
// could take it over). Each gets the user's own value for the same key
// when there is one: a global filter.lfs.* wins over a repository's
// filter.lfs.*, and a repository whose LFS filter was installed with
// `git lfs install --local` only has it off for ralph (`git lfs install`
// installs it globally).
//
// Repo.Blanked lists the program-naming keys the repository defines (and
// core.hookspath when the user's own is relative), for
// a caller to say what is off (ralph names the repository's filters when
// a run that commits begins).
//
// include.path and includeIf cannot be switched off from the command
// line; git lists what an included file defines under the scope of the
// file that includes it, so those keys are blanked like any other of the
// repository's.
//
// Keys that name programs only for commands ralph never runs are left
// alone: alias.*, mergetool.*, difftool.*, diff.tool, merge.tool,
// sendemail.*, web.browser, browser.*, man.*, instaweb.*, gui.*,
// guitool.*, interactive.diffFilter, pager.<cmd> (no pager runs),
// submodule.<name>.update (git submodule update), and the receive side's
// receive.procReceiveRefs. uploadpack.packObjectsHook, safe.directory
// and trace2.* are honoured by git from the user's configuration only.
//
// Nested repositories: git reads a nested repository's configuration only
// when it recurses into it, and the command-scope keys above reach it
// (git passes them on), but the keys blanked because the outer repository
// defines them do not cover drivers the nested one defines. So ralph
// never asks git to look inside one: submodule.recurse is false, and the
// commands that would check a submodule's files by running git status in
// it (git status, git diff against the tree, git add, git commit -a) are
// either given --ignore-submodules=dirty or not used (callers stage with
// StageAll: git diff-files --ignore-submodules=dirty, ls-files and
// update-index).
//
// # Reading the configuration, and the race that remains
//
// Knowing which keys the repository defines takes `git config --list
// --show-scope --show-origin -z`. Its result is kept with the stat data
// of every file it came from and every file git would read if it
// appeared (config, config.worktree, the global and system files, each
// include target, HEAD for includeIf "onbranch:"); a command whose files
// all still stat the same costs a few stat calls and no extra process.
// A listing that read a file modified less than two seconds before it
// began is not trusted a second time (a second write within one tick of
// the file system's clock would not show in the stat data).
//
// Without --sandbox an agent runs as the user and may still be running
// (another worker's agent, a process an agent left behind) while ralph
// runs git: it can add a driver to the repository's configuration
// between the stat check and the moment git reads the file, and that one
// command would run it. The keys given on every command (hooks,
// fsmonitor, ssh, credentials, gpg, ext::) have no such window; only
// filters, diff and merge drivers and the remote's programs named for
// the first time in that instant do. With --sandbox the agent cannot
// write the repository's configuration at all (the git directory is
// read-only inside), and the window does not exist.
//
// What the rule does not reach: a remote on this machine (a path or a
// file:// URL) runs its own receive-pack and upload-pack, with its own
// hooks and configuration, as any push to it or fetch from it does — git
// clears the command-scope entries for that side; the URLs themselves
// (remote.<name>.url, url.<base>.insteadOf) are the repository's to say,
// so an agent can point a remote elsewhere (only ext:: is refused, and a
// "<helper>::" URL runs git-remote-<helper> from PATH); programs git runs
// by name (ssh, gpg, git-upload-pack) are found on the user's PATH.
//
// git's ownership check (safe.directory) does not apply to an explicit
// GIT_DIR; it exists so that a stranger's configuration runs no program,
// which the rules above ensure whoever owns the repository.
//
// # Cancellation
//
// A cancelled context stops git with SIGTERM, on which it removes its
// lock files (index.lock, a ref's lock) and exits; one that has not
// exited WaitDelay (5 s) later is killed, and its output is let go then
// whatever still holds it. git is not put in a process group of its own,
// unlike the gate and the agents (package agentproc): it stays in
// ralph's, the terminal's foreground group, so that ssh can ask for a
// passphrase or a host key and a signing program for a PIN at the
// terminal, which a background group cannot read; Ctrl-C reaches git and
// its hooks from the terminal itself. The price is that a process a
// hook (the user's own: the repository's do not run) left running in
// the background outlives a cancel.
//
// git 2.31 or later is needed (GIT_CONFIG_COUNT; --show-scope is 2.26):
// an older git is ErrGitTooOld, and nothing runs.
package hostgit
