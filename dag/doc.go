// Package dag is ralph's task graph: a SQLite database (modernc.org/sqlite,
// pure Go, no cgo) holding tasks, their dependencies and parents, task
// logs, features and iteration receipts. Store implements loop.TaskStore,
// loop.FeatureStore and loop.ReceiptStore; the status machine and the
// auto-transitions are those of ARCHITECTURE.md §2.
//
// # The file
//
// Every connection sets busy_timeout (Options.BusyTimeout, 5 s by
// default), journal_mode=WAL, foreign_keys=ON, synchronous=NORMAL (the
// usual WAL setting: a commit survives a crash of the process; fsyncs
// happen at checkpoints) and _txlock=immediate, so every write transaction
// is BEGIN IMMEDIATE and takes the write lock before it reads. Reads run
// in deferred (snapshot) transactions and never wait for writers.
//
// The schema is embedded (migrations/NNNN_name.sql) and versioned with
// PRAGMA user_version; Open applies the missing migrations in one
// immediate transaction, so processes opening a new file at once apply each
// exactly once. The file is marked with PRAGMA application_id "RALP". Open
// refuses, with an error naming the path and changing nothing: a file of a
// newer schema (ErrSchemaTooNew); a corrupt file, a file that is not
// SQLite, another application's SQLite database (ErrNotADatabase). An
// existing file is inspected over a plain connection before the WAL pragma
// can touch it. A write that cannot get the lock within the busy timeout
// fails with ErrLocked ("database is locked by another process …"), never
// with SQLite's bare SQLITE_BUSY. On a database server the only lock a
// write waits for in the process is its own previous write's: one that
// waits too long fails with ErrNoAnswer, which says the server has not
// answered (a partition, an overloaded server), never ErrLocked.
//
// Writers of one database are ordered by a lock of their own before SQLite
// sees them: a semaphore inside the process and flock(2) on <db>-lock
// between processes (where the platform has flock). SQLite's busy handler
// polls with sleeps of 1, 2, 5, 10 … ms, so under contention the lock sat
// idle while every waiter slept; the kernel queue hands it over at once.
// Programs that do not take it (the sqlite3 shell) still meet SQLite's own
// locking, so correctness never depends on it.
//
// Everything a write does happens while every other writer waits, so the
// write path is kept short:
//
//   - Write transactions run on one driver connection per Store, opened
//     from modernc.org/sqlite's connector and used only under the write
//     lock, with its prepared statements cached by query text; reads keep
//     the database/sql pool. database/sql's Tx-bound statements, connection
//     bookkeeping and locks were a third of a claim's CPU time.
//   - That connection has wal_autocheckpoint=0: SQLite's automatic
//     checkpoint runs inside the COMMIT that crosses the threshold, copying
//     pages and fsyncing twice under the lock. The Store instead runs a
//     PASSIVE checkpoint after it has released the lock between processes
//     (still under its in-process semaphore), at most every 50 ms, and on
//     Close. A burst of writes can let the WAL reach ~10 MB before a
//     checkpoint catches up (SQLite's default keeps it near 4 MB).
//   - Each page a transaction changes is a WAL frame (two pwrite calls), so
//     the schema keeps the pages per claim and completion few: the partial
//     index of in_progress tasks is keyed by lease expiry (the expired-lease
//     check at the start of every write reads one entry, no task row), and
//     task_logs is a WITHOUT ROWID table clustered by (task_id, seq), seq
//     numbering a task's entries from 1, so an entry is one page, not a
//     table page and an index page. The 'pending' count of status_counts
//     includes the in_progress tasks (Counts subtracts those, found in
//     tasks_active), so a claim moves no count.
//   - Claim (of the first ready task) and Complete carry the expired-lease
//     check in their UPDATE (AND NOT EXISTS over tasks_active): when it
//     changes nothing they recover expired leases and try again, so the
//     usual claim or completion is one statement shorter.
//
// # Claims, holders and recovery
//
// Schema version 2 records, with each claim, who made it (claim_mode: loop,
// agent, or by hand), the process that keeps it alive (holder_host,
// holder_pid, holder_start: loop.Holder) and its generation; every history
// entry records its actor. A claim's entry is written when the claim is
// made. Every write first returns to pending the claims whose lease has
// expired (lease-expired) and those whose holder process ran on this host
// identity and is gone (holder-gone, checked against /proc by pid and start
// time); a store that just found no such claim skips that look for 100 ms
// (a new process always looks), and a holder found alive is taken to be
// alive for a second. Reads recover only when the database can be written,
// waiting at most 200 ms for the lock, and never fail because they cannot.
//
// The store is a loop.ChangeWatcher without queries: its change token is
// the size and modification time of the database file and its WAL, looked
// at by a waiting loop when the store itself commits, when another process
// writes them (inotify on Linux), and every second as a safety net (every
// 50 ms where nothing tells of other processes' writes).
//
// A database that cannot be written (its directory read-only, the disk
// full) is opened read-only for commands that only read: SQLite's read-only
// mode, else the file as immutable when no WAL holds commits the file
// lacks; every write then returns ErrUnwritable with the cause in words
// ("no space left on device (DIR)", "DIR is read-only"). Locked, full and
// I/O errors are Temporary() for the loop's durable outcomes. A 0-byte or
// schema-less file is not a plan: only Open (init) initialises one.
//
// Options.ReadOnly opens a plan for reading only by choice (ralph serve),
// on a file (SQLite's read-only mode) or a server: nothing is created or
// migrated (a schema version other than this ralph's is an error), reads
// recover no expired or orphaned claim, and every write returns an error
// wrapping ErrReadOnly.
//
// # On a database server
//
// OpenServer runs the same rules over a Server (package dag/postgres).
// A write transaction
// there takes the plan's lock on the server (Server.LockPlan) where SQLite
// takes BEGIN IMMEDIATE, and locks the rows it reads to move; the claim of
// the first ready task runs without the plan lock, taking its row with
// FOR UPDATE SKIP LOCKED, and the completion of a claim by its holder
// with the lock's shared form (Server.LockPlanShared), beside other
// completions. Reads run statement by statement unless the server says
// otherwise (Server.ReadTx: READ COMMITTED gives each statement its own
// snapshot in a transaction too). A server's
// connection runs one query at a time,
// so listing reads each task's blockers in its row. Writes and reads the
// server could not take are retried with backoff (ServerOptions.RetryFor).
// A plan on a server keeps its features' spec and plan files too
// (FeatureFiles), so that every machine reads the same: SyncFeatureFiles
// brings a project's copies and the stored ones together, the newer
// winning, following no link; ralph runs it around every command that
// lets an agent read or write them.
//
// # Drivers and dialects
//
// The rules run on a driver, in the shape of River's riverdriver: a Store
// holds one from the moment it is made — SQLite's (this package) for a
// file, a server's over the Server package dag/postgres implements — and
// asks it, never "is there a server?", for what differs: how a write
// transaction begins and takes the plan's lock, the clauses that lock
// rows, what an error means and whether it may be retried, the outcome
// of a lost COMMIT, change notification, the import's tuning, the few
// queries whose text differs (a recursive query, the listing's filter and
// blockers).
//
// The rules' other queries are written once, in SQLite's dialect, and the
// driver turns each into its own when it is prepared (Server.Rebind: "?N"
// parameters become "$N", SQLite's index hints and "OR FAIL" go, a few
// names change — package dag/postgres lists them all). This rewriter is
// kept, rather than a copy of every query per dialect as River's drivers
// have: the queries are the graph rules, inline with the Go that reads
// and writes by them, and two copies of each would drift; the rewriting
// is a handful of fixed, mechanical changes, and anything a query needs
// beyond them is a method of the driver. Both stores run
// looptest.TestTaskStore, which exercises every query of the rules, so a
// query the rewriter gets wrong fails the suite on PostgreSQL.
//
// # Readiness is kept on write
//
// A task is ready when it is pending, has no children, its parent is not
// failed and every blocker is done. Each task row stores unmet_blockers
// (blockers not done), child_count and parent_failed, updated in the
// transaction that changes them (and blocker_count and dependent_count, so
// that the many tasks without dependencies never look in the deps table); a partial index over exactly those
// conditions, ordered by (priority, raced DESC, chain DESC, seq) — the
// order of ready tasks of DESIGN §17, chain.go — makes the first ready
// task the first index entry at any plan size. The ready queries name that index
// (INDEXED BY): without statistics SQLite has preferred other indexes and
// a sort. Counts by status (and feature) live in a small table kept by
// triggers, so Counts reads a handful of rows at any plan size and no index
// over every status makes each claim and completion write more pages; a
// partial index finds the few in_progress tasks. Insertion order is an
// integer sequence (seq), never a timestamp. Times are stored as Unix
// nanoseconds.
//
// # Decisions
//
//   - Generated ids are "t-<n>", n the next insertion number, skipping any
//     id in use (imported ids may look the same).
//   - A task waits for its blockers and for its children (a parent is done
//     only when they are), so a cycle is any loop in that waits-for graph:
//     a task blocked by its own ancestor is refused with ErrCycle like a
//     plain dependency cycle. A self-dependency is a cycle too.
//   - Done (auto-transition): dependents lose an unmet blocker; an
//     explicitly blocked dependent with none left becomes pending (logged
//     "unblock"); a parent whose children are all done becomes done (logged
//     "done: all children done"), recursively upward. An in_progress parent
//     is left to its holder. RemoveDependency does not unblock: only a
//     blocker becoming done does.
//   - Fail: ancestors become failed (logged "child X failed") up to the
//     first that is already failed or done.
//   - Reset: failed → pending, RetryCount unchanged; each failed ancestor
//     that has no other failed child goes back to pending too (it failed
//     only because of this task). Retry (the loop's) leaves ancestors alone,
//     as loop.TaskStore says.
//   - A claim is not logged: a task's latest log entry is what dependents
//     see as its summary, and the claim lives in claimed_by/claimed_at.
//   - Claim of a named task that is not pending fails with an error that
//     wraps both loop.ErrNotReady and the *loop.TransitionError.
//   - Expired leases are recovered at the start of every write transaction
//     (inside it), and by reads when an indexed look-up finds one; each is
//     logged as kind lease-expired naming the old holder.
//   - Add refuses a done parent (a done task takes no new subtasks), blank
//     titles, and ids that cannot be ids: longer than MaxIDBytes (80
//     bytes: an id names git branches, ralph/task/<id>, where every byte
//     but a letter, a digit, '-' and '_' is written %XX, and a ref's
//     path component is a file name of at most 255 bytes —
//     ARCHITECTURE.md §7.7), not UTF-8, or with spaces or control characters.
//     Import refuses them the same way, naming the line, and adds nothing.
//   - Import keeps statuses (in_progress becomes pending), computes
//     readiness from them, writes no log entries, requires named features
//     to exist, and names the input line of the first offending task.
//     Tasks without an id get generated ones. A parent in the batch is
//     inserted before its children, the batch's order kept otherwise.
//
// # Big plans
//
// Listing streams: EachTask hands each task to its caller as it reads it,
// with the blockers from a second cursor over deps in the order of the
// blocked tasks, merged with the first (no query per task, no deps table in
// memory). Import streams: ImportFrom reads its source twice in one write
// transaction, keeping between the passes a few integers a task and the ids
// (an open-addressing table over one byte arena), so that a batch of a
// million tasks imports in memory well under the size of its file; the
// cycle search runs over arrays. The second pass inserts many rows a
// statement with explicit seqs (a parent's place before its first child),
// with foreign keys and CHECK constraints off and the status-count trigger
// dropped for the transaction (the first pass has checked all they check;
// the counts are added once at the end and the trigger created again from
// its own SQL), statement journals in memory and a 16 MB page cache; each
// is set back as the transaction ends.
//   - Feature names must be usable as directory names; spec and plan paths
//     are stored as given (the CLI fills in the defaults).
//
// # Runs
//
// Schema version 7 (PostgreSQL: 7) keeps a record of each build, plan and
// prompt run (loop.RunRecorder, DESIGN §15): the runs table, one row a
// run, whose seq is its id; outcome 'running' and exit_code NULL until
// EndRun. The holder's host, pid and start time are stored as a claim's
// are, so that a reader can tell a run whose process died
// (loop.RunRecord.Settled); the store itself never marks one dead. The
// writes touch no task and skip the look for expired claims.
//
// # Landings
//
// Schema version 5 (PostgreSQL: 4) records what ralph lands on a plan's
// integration branch (loop.LandingStore, ARCHITECTURE.md §7): the landings
// table, one row a commit and branch, and branch_tips, where ralph last put
// each branch. The rules are the same on both stores (one implementation);
// the writes that touch no task skip the look for expired claims.
// AcceptTip's reopen of a done task is a move outside the status machine's
// triggers: the task and each done ancestor go back to pending, logged
// loop.LogReopen as the accepting person, and each of their dependents
// counts them as an unmet blocker again (a dependent that is done stays
// done: its own landing says whether its work is on the branch). A landing
// names its task by id, with no foreign key: AcceptTip skips a task that no
// longer exists.
//   - SetVerification accepts "pass", "fail" or "" (clear).
//   - Receipts come back newest first by insertion.
package dag
