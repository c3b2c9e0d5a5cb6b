// Package progress is a loop.TaskStore over a markdown progress file
// (`ralph build --progress FILE`) with the bookkeeping that build does in
// the file (Recorder, DocumentRunner), and the reader of
// markdown checklists for `ralph task import FILE.md`. It
// imports only loop, safefile and the standard library.
//
// # The file
//
//	# Progress: <name>
//	## Status
//	In Progress            ← or RALPH_DONE alone on a line
//	## Tasks
//	### Phase 1: <name>
//	- [ ] a task
//	- [x] a finished task
//	## Completed This Iteration
//	## Recent Attempts
//	### Iteration <n>
//	- Tried: … / - Result: … / - Next: …
//	## Iteration Log
//	| Iteration | Started | Duration | Tasks Completed | Notes |
//
// Parse reads it as CommonMark (0.31) with GitHub's task lists, so that
// what ralph takes for a task is what GitHub shows as a checkbox: the
// block structure is read line by line as CommonMark's reference
// implementation does (scan.go), by hand rather than with a markdown
// library: the package map lets this package import loop and the
// standard library only, and a library's syntax tree of a large file
// costs many times the file (goldmark's of a 35 MB file held 680 MB).
// Inline markup is not parsed: it never decides which lines are tasks.
// The reading is linear in the file's size whatever its shape
// (ARCHITECTURE.md §7.7): a line is matched against the open list items and
// block quotes in time linear in the line, not in their number (a blank
// line continues all of them up to the first it cannot, found without
// walking them; the indentation is read once, not once per item; the rest
// of a line of list markers is read once to know whether it is a
// thematic break, not at each marker). Each of those three shapes once
// took minutes at 800 KB (BenchmarkChecklistNested, below).
// Decisions:
//
//   - The "# Progress: <name>" heading must be the first non-blank line (HTML
//     comments may precede it) and a "## Tasks" section must exist; every
//     other section is optional, may come in any order, and section names
//     match case-insensitively. A known section twice, a second
//     "# Progress:" heading, a box without text, and a code fence or an
//     HTML comment (or <pre>, <script>, <style>, <textarea>, "<?", "<!X",
//     CDATA block) never closed before the end of the document are errors
//     (*ParseError, naming the line, wrapping ErrNotProgressFile): it would
//     silently hide every box after it. Any other level-1 or level-2
//     heading starts a section of the user's own, which ralph never reads
//     or changes.
//   - Headings are the top-level ones (not in a list item or block quote):
//     ATX headings ("## Tasks"; up to three spaces before, closing "#"s
//     allowed) and setext headings (text over a line of "=" or "-"; the
//     title must be an ATX heading, as ralph writes it). So "Notes" over
//     "-----" ends the Tasks section, and "RALPH_DONE" directly over "---"
//     is a heading, not Status text. A table's rows over "---" stay a table
//     (GFM). A UTF-8 byte order mark before the title is allowed, and CRLF
//     line endings are kept.
//   - Code (indented four columns where no paragraph goes on, or fenced
//     with ``` or ~~~) and HTML blocks (a comment, <details>, <div>, a tag
//     alone on its line, …, up to where CommonMark ends them: "-->", the
//     closing tag, or a blank line) count for nothing: no boxes, headings
//     or RALPH_DONE there. Neither do block quotes: a box there is quoted,
//     not a task.
//   - A box is a task list item as GitHub reads it: a list item ("-", "*",
//     "+", "1." or "1)") whose content starts, on the marker's line, with
//     "[ ]", "[x]" or "[X]" followed by a space, a tab or the end of the
//     line, in the Tasks section, outside block quotes. List items follow
//     CommonMark: an item nested under another item (a box or a plain
//     bullet) is a task; four spaces under a paragraph continue the
//     paragraph; an ordered item other than 1 cannot interrupt a
//     paragraph; content five columns after the marker is code.
//     "- [2026-01-29] …" is not a box, and neither is a box in any other
//     section. Nesting does not nest tasks: a box under another is its own
//     task in the same phase; indented lines under a box that are not
//     boxes become its description.
//   - A phase is a "### Phase N: name" heading in Tasks (case-insensitive;
//     the separator may be ":", ".", ")", a dash or nothing); it is the
//     parent of the boxes up to the next level-3 heading, and its title is
//     the name ("Phase N" when there is none). Any other "###" heading ends
//     the current phase: the boxes under it, like those before the first
//     phase, have no parent. Deeper headings ("####") change nothing. A
//     phase without boxes is not a task. (Treating every "###" as a phase
//     would make a parentless task after a phase impossible to write.)
//   - RALPH_DONE counts only alone on a line (after trimming) of the Status
//     section; in a task's text, in another section, in code or in a
//     comment it does not. (This is sigil.RalphDone's rule applied to each
//     line of one section; a test checks that the two agree. Package sigil
//     is not imported: ARCHITECTURE.md §1 has this package import loop
//     and safefile only.)
//   - Recent Attempts blocks are the "### Iteration <n>" headings of that
//     section, each up to the next "###" heading or the section's end.
//     "Tried:", "Result:" and "Next:" bullets are read (case-insensitive,
//     "**Tried:**" too); indented lines continue a value. Other "###"
//     headings there are user text.
//   - The Iteration Log is the markdown table of its section: the first
//     "|" line is the header, a "|---|" line is skipped, the rest are rows.
//
// # Task ids
//
// Ids are derived from the text, so they survive the agent ticking boxes,
// inserting tasks above, or reordering them: a "Phase N" heading is
// "phase-N"; a box is the slug of its text (lowercase letters and digits
// joined by "-", markdown punctuation dropped, cut at a word boundary near
// 48 runes or 64 bytes, "task" if nothing is left: with a suffix it stays
// within the 80 bytes a task id may have once imported, dag.MaxIDBytes). A
// repeated id gets "-2", "-3", … in file order. Rewording a task changes its id; a claim on the old id then
// finds nothing (loop.ErrNotFound) rather than ticking the wrong box, which
// is what position-based ids ("the 3rd box") would do after an insertion.
//
// An id can also be given: "- [ ] Fix login <!-- id: T-12 -->" (on a box or
// a phase heading; invisible when the markdown is rendered). Explicit ids
// win, must be unique in the file, and survive rewording. Derived ids never
// take an explicit one.
//
// # The store
//
// It passes the looptest conformance suite with WithoutDependencies (a
// progress file has no blockers and no blocked status),
// WithoutPriorities (file order is the only order), WithoutFeatures,
// WithoutNesting (phases do not nest) and WithoutChecks (a box has no
// place for a check command: its tasks have no loop.Task.Check, and a
// per-task check needs the SQLite or PostgreSQL plan); leases are
// supported.
//
// Store reads the file on every call: the agent or the user may edit it
// between iterations (or during one). It keeps the content it last read or
// wrote and its parse; a call compares the file with that content through
// a small buffer and parses again only when they differ (byte for byte,
// not by size or time: ticking a box changes neither). The file is the
// truth for which tasks exist and which are done (ticked); everything else
// lives in memory for the life of the Store, i.e. one run:
//
//   - Claims are in-memory leases. One loop process drives a progress file:
//     `--claim agent` (the agent claiming through `ralph task claim`) and
//     claims across processes are not supported. Expired leases are
//     returned to pending by the next call, with a loop.LogLeaseExpired
//     entry, as in the other stores.
//   - Status: a ticked box is done; an unticked box is in_progress while
//     claimed, failed once failed in this run, pending otherwise. Nothing is
//     ever blocked and there are no dependencies. A phase is done when all
//     its boxes are ticked, failed once one of its boxes failed (until the
//     phase itself is retried), pending otherwise.
//   - Ready/Claim: the unticked boxes that are neither claimed nor failed
//     and whose phase has not failed, in file order (Priority is always 2;
//     file order is the order). A phase is never ready (it has children).
//     A Scope naming a phase holds its boxes, naming a box that box; an
//     unknown id is loop.ErrNotFound; a Feature scope is ErrFeatures.
//   - Counts counts boxes only: total is the number of boxes and the plan is
//     resolved exactly when every box is ticked or failed.
//   - Complete ticks the box: one byte of the file changes. If the agent
//     ticked it already, Complete still succeeds (and writes nothing).
//   - Fail keeps the box unticked, does not offer it again in this run, and
//     records the failure as a Recent Attempts block (numbered one past the
//     last AppendIteration row of this run). As in the task graph, the
//     failure fails the phase, whose other boxes are then not offered
//     either: later tasks of a phase usually build on earlier ones. The loop
//     goes on with other phases; if the failed phase still has unticked
//     boxes when nothing else is ready, the run ends blocked, as over the
//     task graph. Retry of the box makes it pending again; Retry of the
//     phase makes its boxes ready again.
//   - Release, ReleaseAgent, Retry, SetVerification, AddLog and Logs act on
//     memory only; task logs are not written to the file.
//   - Done(ctx): RALPH_DONE in Status, or at least one box and every box
//     ticked. A file without boxes is not done; Counts shows an empty plan.
//     RALPH_DONE changes neither Counts nor Ready (they count boxes, and
//     lying about them would mislead `ralph status`): a loop driving a
//     progress file asks Done before each iteration and ends the run as
//     complete when it says so.
//   - AppendIteration appends a row to the Iteration Log table (creating the
//     table, or the section at the end of the file) and, in the same write,
//     trims Recent Attempts to the last KeepAttempts (the agent may have
//     added its own). AddAttempt appends a block at the bottom of Recent
//     Attempts (creating the section before Iteration Log, else at the end)
//     and drops the topmost blocks past KeepAttempts. Blocks are kept in
//     file order, assumed oldest first; they are not sorted.
//   - ReplaceDocument takes an agent's whole updated document. It must
//     parse, and it must keep every box the file has now (by id; ticked or
//     not, and new boxes are welcome): a truncated answer or a reworded task
//     is refused (ErrLostTasks) and the file is untouched.
//
// Every write keeps every byte outside what it changes: the character
// between a box's brackets, the inserted row or block, the dropped attempt
// blocks. New text uses the file's line ending (CRLF if its first line has
// one). A write is atomic: the new content goes to a temporary file in the
// same directory, which gets the old file's permissions, is fsynced and is
// renamed over the file; the directory is then fsynced, best effort. No
// link is followed (ARCHITECTURE.md §7; package safefile): the file is read
// and replaced from Options.Root (the project root; the file's own
// directory without it), and a symbolic link at the file or on the way is
// refused with an error naming it — at Open (give the link's target
// instead) and at any later read or write, so a link an agent plants at the
// progress file never has ralph write the plan into its target. A crash
// before the rename leaves the old file intact and, at worst, a stray
// ".<name>.ralph-*.tmp" file beside it. Just before the rename the file is
// read again; if it changed since it was parsed, the change is recomputed
// on the new content (three tries, then ErrConflict), which narrows, but
// cannot close, the window in which an edit by someone else could be
// overwritten.
//
// # Driving a progress file
//
// What `ralph build --progress FILE` does beyond the store is here too, so
// that a program embedding the library gets the same file:
//
//	st, err := progress.Open(path, progress.Options{})
//	if err != nil { … }
//	rep, err := loop.Run(ctx, cfg, progress.Recorder{Store: st},
//		&progress.DocumentRunner{Runner: agent, Store: st, Refused: warn})
//
// The two parts:
//
//   - Recorder is the Store as the loop's IterationRecorder: after every
//     iteration that counts (not a usage-limit wait) it appends an
//     Iteration Log row, "title (id): status" in Notes and the loop's count
//     of tasks completed, which trims Recent Attempts to KeepAttempts; an
//     iteration on a task that neither finished nor failed it also gets an
//     attempt block (Result: the status and the loop's reason on one line;
//     Next: "the task is offered again"). A failed task gets its block
//     from Fail. A bare Store keeps no log of its own: a program writing
//     its own rows (AppendIteration, AddAttempt) is not given a second one.
//   - DocumentRunner wraps the agent's runner (not a verifier's): a clean
//     session whose final text is a whole progress file (it starts
//     "# Progress:") goes to ReplaceDocument before the loop judges the
//     task, so boxes the agent ticked there count. A document that drops
//     boxes or does not parse is refused, the file is untouched, and
//     Refused is told why (the CLI prints it as a note).
//
// # Checklists
//
// Checklist returns the phases and boxes of a progress file, or of any
// markdown checklist (boxes, read as above, grouped under the nearest
// top-level heading of any level and any text; "Phase N: name" headings
// are named and numbered as in a progress file), as Items in file order with Parent links and ids. The
// CLI maps them to task imports: phases become parent tasks, checked boxes
// done tasks, explicit ids the task ids, and file order the insertion order
// at equal priority, which is the ready order.
//
// # Cost
//
// A Store call reads the file through a 256 KB buffer to compare it with
// what the store last read or wrote; it parses only when they differ. A
// write builds the new content in one allocation, compares the file once
// more, writes a temporary file, fsyncs and renames it; after Complete the
// store keeps its parse (one byte changed), after other writes it parses
// the new content when next needed. So between calls the store holds the
// file once plus its parse: 16 bytes a line and about 110 a box (its Item
// and id). An iteration parses once or twice: after the last iteration's
// Iteration Log row, and again if the agent edited the file.
//
// On a shared, loaded 2-core machine, one build iteration (loop.Run with
// Once: every store call the loop makes, plus the log row) over a 50 MB
// file, before these changes and after (three iterations each):
//
//	go test ./dag/progress/ -run '^$' -bench '^BenchmarkIteration$' -benchtime 3x -args -progress-mb=50
//
//	                        before            after
//	700,000 boxes, sigil    30.2 s  1202 MB   0.99 s  395 MB peak RSS (173 MB between iterations)
//	700,000 boxes, tick     14.9 s  1177 MB   1.31 s  406 MB          (175 MB)
//	400 boxes, long log      7.1 s   874 MB   0.46 s  185 MB          (74 MB)
//	same, agent ticks        7.1 s   981 MB   0.30 s  188 MB          (78 MB)
//
// ("tick": the agent ticks its box in the file itself, so the store finds
// the file changed; the resident set includes the ~15 MB of the test
// process.) The peak is about twice what is live at the worst moment, a
// write: the old content, its parse and the new content, with Go's
// collector letting the heap reach twice the live data.
//
// On the benchmarks' bigFile (55 KB, 50 phases, 1000 boxes), medians of
// five runs of
//
//	go test -run '^$' -bench 'BenchmarkParse$|BenchmarkReady|BenchmarkAppendIteration' -benchtime 2s -count 5 -benchmem ./dag/progress/
//
// were: Parse 0.62 ms (2131 allocs; 1.09 ms and 4207 before), Store.Ready
// 11 µs (1.44 ms before, when it parsed), Store.AppendIteration 1.7 ms (an
// atomic, fsynced write, and the parse of the new content at the next
// call; 3.4 ms before).
//
// Reading 800 KB checklists (Checklist, as `ralph task import FILE.md`
// does) of nestedChecklist's shapes, on the same machine, before the scan
// was made linear and after:
//
//	go test ./dag/progress/ -run '^$' -bench '^BenchmarkChecklistNested$' -benchmem
//
//	                                               before     after
//	markers: 102,400 list items opened on one line,  405 s    32 ms  (25 MB)
//	  then blank lines
//	stars: "* * * … [ ] x", one 800 KB line          231 s    37 ms  (57 MB)
//	staircase: each box one level deeper             0.80 s   5.4 ms
//	nested: phases of boxes three levels deep        20 ms     15 ms
package progress
