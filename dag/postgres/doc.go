// Package postgres keeps a ralph plan on PostgreSQL (ARCHITECTURE.md §6),
// through github.com/jackc/pgx/v5. Open returns a *dag.Store: the graph
// rules — status machine, auto-transitions, readiness counters, the ready
// order, cycle refusal, claims, leases, holders, generations, recoveries,
// history, features, receipts — are package dag's, run over the dag.Server
// this package implements (PostgreSQL's driver: its statements, its
// dialect, what its errors mean), and the conformance suite
// (looptest.TestTaskStore) and the CLI's tests run against both stores.
// dag's queries are written in SQLite's dialect; Rebind rewrites each (see
// rebind, and dag's package doc, "Drivers and dialects", for why).
//
// Errors speak of this package's API, never of the CLI's commands or
// flags: *NoPlanError (Config.Create makes the plan),
// *OtherRepositoryError (another plan name keeps two repositories apart),
// *MissingTablesError; the CLI words them with its commands.
//
// # Decisions
//
//   - Many plans, one database: each plan is a schema of its own
//     ("ralph_plan_<id>"), which its connections have as their
//     search_path, so the rules' queries need no plan column. The
//     registry ralph.plans records each plan's name, the repository's
//     root commit (checked: a clone of another repository is refused;
//     a plan made outside a repository is claimed by the first), and its
//     schema version (an older ralph refuses a newer plan). Plan names
//     are free text (no control characters, at most 200 bytes); the
//     schema name never holds them.
//   - Migrations are embedded (migrations/NNNN_name.sql), forward only,
//     applied in one transaction under an advisory lock on the registry,
//     so processes opening a new plan at once make it once.
//   - Writes are ordered as on SQLite: every write transaction takes the
//     plan's advisory lock (pg_advisory_xact_lock("RALP", plan id)) first,
//     so the rules, which read and then write, need no other care; the
//     rows a write reads to move are also locked (FOR UPDATE). The claim
//     of the first ready task is the exception: one UPDATE whose sub-select
//     takes the first ready row with FOR UPDATE SKIP LOCKED, without the
//     plan lock, so machines claiming at once do not queue; when a lease
//     has expired or a holder is gone, the claim takes the plan lock and
//     recovers first. The completion of a claim by its holder is the
//     other: it takes the lock's shared form
//     (pg_advisory_xact_lock_shared), beside other completions and
//     claims and no other write, and locks each row it reads to move —
//     its task, the dependents in the order of their ids, the parent
//     before it counts the children — so completions on many machines
//     do not queue either; one that finds a claim to recover runs again
//     with the whole lock. Two machines adding opposite dependencies at
//     once are ordered by the lock: the second sees the first's edge and
//     is refused as a cycle.
//   - Insertion order (seq) is the largest seq plus one, given by a
//     trigger under the plan lock, as SQLite's INTEGER PRIMARY KEY gives
//     it; counts by status are kept by triggers, as on SQLite, in shards
//     (one per server process modulo 32, summed when read): one row per
//     status would make every completion wait for the one before it to
//     commit.
//   - Reads run statement by statement, outside a transaction: at READ
//     COMMITTED each statement of a transaction would see its own
//     snapshot anyway, and BEGIN and ROLLBACK cost two round trips.
//     Behind a pooler they share one (each statement outside one would
//     pay its own BEGIN and COMMIT there).
//   - Waiting loops LISTEN on the plan's schema name. Triggers notify it
//     at a commit that can make a task ready or end a claim (a task
//     added, a status other than in_progress reached, a readiness counter
//     moved), and only while a loop or a viewer waits: a NOTIFY queues
//     the commits of the transactions that make it behind each other,
//     WAL flush included, so that a plan's completions could not share
//     one. A waiting process holds the shared form of the plan's 32
//     "waiting" advisory locks (waitKey) on its listening connection; a
//     change asks for the exclusive form of its shard without waiting
//     and notifies only when it cannot have it (migration 0013). The
//     locks are taken after the LISTEN and before the loop reads the
//     plan, and wait for the commit of a change that holds one: no change
//     goes unheard. A loop's listener connects at its first wait, which
//     then ends at once (the loop reads the plan again, heard), and lets
//     go five seconds after its last wait or token (waitLinger). A claim
//     notifies no waiting loop. A listener that lost its connection counts
//     that as a change and connects again.
//   - The writer's connection sends a statement whose answer is only
//     whether it failed — BEGIN, a history entry — with the statement
//     after it, in one round trip (dag.Batcher, a pgx batch): a claim and
//     its completion take five round trips instead of nine. Not behind a
//     pooler (see below).
//   - A viewer (ralph serve, through dag.Store.ViewChanges) wants the
//     claims too, and without asking for them every second (each wake-up
//     of an idle process costs milliseconds of CPU on a virtual machine).
//     It also LISTENs on <schema>_claims, and a second connection of its
//     own waits for, then holds, an advisory lock of the plan's (viewKey,
//     the plan's id) while it watches. A claim, or a task claimed again,
//     asks for that lock's shared form without waiting (microseconds): it
//     cannot have it while any viewer waits or holds, and then notifies
//     that channel; with no viewer it notifies nobody. So claims queue on
//     the notification queue only while a page is open.
//   - Faults: the store runs again, with backoff for up to a minute
//     (dag.ServerOptions.RetryFor), a write whose transaction certainly
//     changed nothing (the connection lost before the commit was sent, a
//     deadlock, a serialization failure), and any read that failed so.
//     A write whose COMMIT answer was lost with its connection (a
//     terminated backend commits, then says it is shutting down) is not
//     simply run again: it noted its transaction id before committing
//     (pg_current_xact_id), and the store asks the server on another
//     connection whether that transaction committed (pg_xact_status):
//     committed, the write succeeded; rolled back, it runs again; still
//     unknown after RetryFor, its error is Temporary. So no claim is made
//     twice and no completion is refused as stale. PostgreSQL 13 or later.
//   - Silence: a network partition drops packets without a reset, and a
//     read would wait for TCP to give up (a quarter of an hour or more).
//     The pool's and the writer's connections count as lost once the
//     server has been silent for Config.AnswerTimeout (30 s) while ralph
//     waits for its answer (answerConn: a read deadline from each write
//     and each byte heard), and the call is retried as above; the
//     listeners' connections, silent by design, are not bounded so. The
//     sessions carry idle_in_transaction_session_timeout = 1 min, so that
//     a machine cut off in the middle of a write transaction frees the
//     plan's lock for the others. dag.ServerOptions.OnTrouble hears when
//     the server stops answering and when it answers again.
//   - Poolers: behind a connection pooler in transaction pooling
//     (PgBouncer's pool_mode = transaction), found out from the first
//     connection — the pooler refuses the startup parameters above, as
//     PgBouncer does by default, or drops them — nothing is kept in the
//     session: each transaction sets the search path and the idle timeout
//     itself (SET LOCAL through set_config, sent with its BEGIN), a
//     statement outside a transaction runs in one of its own that does,
//     no statement is prepared by name (pgx's QueryExecModeCacheDescribe),
//     no statement is sent with another (pgx describes a batch's
//     statements before it, outside the transaction that sets the search
//     path), a viewer and a waiting loop take no advisory lock (a change
//     notifies no one of them), and waits ask every pollEvery
//     (100 ms) for a digest of the counts and the claims instead of
//     listening (pooler.go). A pooler that passes startup parameters
//     through but pools transactions is not told apart from a server.
//   - Passwords: a URL may hold one (it is used), but ralph shows and
//     stores URLs without it (Redact); PGPASSWORD and ~/.pgpass work as
//     for psql. Connection errors say which user the server refused and
//     where the password comes from.
//   - Feature specs and plans live in the plan's feature_files table
//     (dag.Store.FeatureFiles), so every machine reads the same; the CLI
//     syncs them with the project's files, the newer copy winning.
package postgres
