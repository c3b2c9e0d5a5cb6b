// Package serve is `ralph serve`: a read-only web view of a plan, its
// running build and its costs, live.
//
// A Server (New, or ListenAndServe) serves one page (assets/, embedded:
// no build step, no framework) and a small JSON API that the page reads:
//
//	GET /                  the page; routes #/ (graph), #/list, #/task/<id>
//	GET /assets/<file>     its script and style
//	GET /api/plan          every task with its status, readiness and layout
//	GET /api/task/<id>     a task with its parent, blockers, history, receipts and raw streams
//	GET /api/receipts      every receipt, oldest first
//	GET /api/run           the live sessions' workers, from their event logs
//	GET /api/events        server-sent events: plan, run, receipts
//	GET /api/runs?n=N      the latest N run records (default 50), newest first
//	GET /logs/<s>/<file>   a raw stream of session s, as plain text
//
// It reads the store (opened with dag.Options.ReadOnly by the command)
// and the log directory, and changes nothing. /api/plan carries the last
// run record (last_run), which the page shows above every view.
//
// A plan on a database server (Config.DBPath empty) is looked at with one
// small read, bounded by 800 ms, before each API request: a server that
// does not answer — stopped, or cut off by the network, where a read
// would wait for TCP — is answered 503, {"error": "the plan's store is
// unreachable: …", "unreachable": true}, within a second, not after the
// store's minute of retries.
//
// # Decisions
//
//   - Graph layout is computed here, in Go, not in the browser: layered by
//     blockers (a task one layer right of its deepest blocker), each layer
//     ordered by feature, then parent, then barycenter sweeps, wrapped
//     into columns of at most MaxColumn nodes. It is deterministic (the
//     same plan gives the same picture) and tested and benchmarked in Go.
//     The page only draws it: plain SVG built as one string, pan and zoom
//     by one transform. Above 2,000 tasks the page shows the list (a
//     virtualised table with filters) by default; above 300 it hides the
//     done tasks whose dependents are all done, as one "N done" node.
//   - Versions: the plan's version is a hash of what the page shows of
//     each task, so a `plan` event goes out only when something visible
//     changed (a lease renewal or a receipt alone does not redraw).
//   - Watching: nothing watches while no event stream is open; the first
//     stream starts one watcher, the last one to close stops it. On
//     Linux it is inotify (the database's directory for the file and its
//     write-ahead log, the log directory for new sessions, the newest
//     sessions' directories for their events.jsonl); the read blocks in
//     the runtime's poller, so an idle view costs no CPU. Elsewhere, or
//     when inotify fails, the files are looked at every second. A plan on
//     a server is watched through the store's ViewChanges
//     (PostgreSQL notifications, the claims' too: a claim notifies only
//     while a viewer's listening connection is there, since a NOTIFY
//     queues the claims' commits; see dag/postgres), so an idle view of
//     it costs no CPU either.
//     Changes are coalesced for 100 ms. With no claim held, the only
//     timer of an idle stream is its 25 s keep-alive comment (see below
//     for claims).
//   - Event logs are read incrementally (from the offset read last), whole
//     lines only. The newest five sessions with an event log are looked
//     at; a session is live while some worker has no session_end line and
//     its log grew in the last 30 minutes (or a usage-limit wait is under
//     way): a killed build does not show as running forever. A run without
//     workers shows as the worker "main". Claims in the store that no live
//     log explains (another machine, a person) show as workers named by
//     their holder, without events.
//   - Stale claims and killed builds: a claim still in_progress whose
//     holder process is gone (on this host) or whose lease ran out is
//     shown as stale ("holder gone", "lease expired"), not as an agent at
//     work, and a session whose build's process is gone (the event log
//     names it on each iteration_start line) is not live. The view does
//     not recover such claims itself (it writes nothing): the next ralph
//     command on the plan does, and the page follows. Since a death
//     writes nothing, the watcher looks at the live holders' processes
//     every 5 s (/proc, not the store) while there are any, and waits for
//     the earliest lease with one timer; with no claim held and no build
//     running, nothing of this runs.
//   - Security: loopback by default, and then the Host header must name
//     the loopback address and port (DNS rebinding). Any other address
//     needs a token: Authorization: Bearer, or ?token= once (answered with
//     an HttpOnly SameSite=Strict cookie and a redirect that drops it from
//     the URL), or the cookie; compared with crypto/subtle, never echoed.
//     Only GET and HEAD; no CORS headers; a Content-Security-Policy of
//     'self' only (no inline script or style), nosniff, no referrer, no
//     framing.
//   - Raw logs: /logs/<session>/<file> takes exactly two segments of
//     letters, digits, '.', '_' and '-' (not starting with a dot), checked
//     on the escaped path so that %2f, %2e%2e, backslashes and NULs are
//     refused; the file is opened through package safefile from the
//     project root (Config.Root): no symbolic link on the way is followed
//     — .ralph/logs itself, the session directory, the file, even a link
//     that stays inside — and it must be a regular file. The session list
//     and the event logs are read the same way (a linked session is not
//     shown). A link an agent swaps in during requests can therefore never
//     make a request serve a file from elsewhere (issue 20, item 12: the
//     resolve-then-open check it replaces served one in 322 of 50,021
//     requests). Anything else is 404.
//   - Assets are served with Cache-Control: no-cache and an ETag (their
//     hash): a new ralph's page never mixes with an old one's script.
package serve
