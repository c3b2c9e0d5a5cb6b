package dag

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/maphash"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ralph-dev/ralph/loop"
)

// A TaskSource is the input of Store.ImportFrom: tasks in input order,
// which an import reads twice — once to check the whole batch, once to
// write it — so that it never holds the batch in memory.
type TaskSource interface {
	// Tasks yields the tasks from the first, each time it is called; an
	// error ends the sequence (it names the input line).
	Tasks() iter.Seq2[ImportTask, error]
	// Dropped returns ids that are not tasks of the batch but that its
	// tasks may name as parent or blocker: those references are dropped
	// (beads exports name their deleted issues so). It is called after a
	// complete pass.
	Dropped() []string
}

// TaskSlice is a TaskSource over tasks in memory.
type TaskSlice []ImportTask

// Tasks implements TaskSource.
func (ts TaskSlice) Tasks() iter.Seq2[ImportTask, error] {
	return func(yield func(ImportTask, error) bool) {
		for _, t := range ts {
			if !yield(t, nil) {
				return
			}
		}
	}
}

// Dropped implements TaskSource: none.
func (TaskSlice) Dropped() []string { return nil }

// ImportParams are the arguments of Store.ImportFrom.
type ImportParams struct {
	// Source yields the tasks to add.
	Source TaskSource
	// DryRun makes every check the import makes, and writes, but rolls
	// back at the end: the database is left as it was.
	DryRun bool
	// Added, if set, is called in the transaction with each task added
	// (or, in a dry run, that would have been), in insertion order, as the
	// store holds it: status normalised, blockers without repeats.
	Added func(ImportTask) error
}

// Import adds all tasks in one transaction, all or nothing, and returns how
// many were added: ImportFrom over the slice. Statuses are taken as given
// (in_progress becomes pending) and readiness is computed from them; no log
// entries are written. Tasks without an id get a generated one. A parent
// named in the batch is inserted before its children (and otherwise the
// batch's order is kept): a plan may list its epic after the epic's tasks.
// Errors name the offending task by its Line, e.g. "line 7: task t-3:
// parent t-99 does not exist", and wrap ErrDuplicateID, ErrCycle,
// loop.ErrNotFound or loop.ErrFeatureNotFound where they apply.
func (s *Store) Import(ctx context.Context, tasks []ImportTask) (int, error) {
	if len(tasks) == 0 {
		return 0, ctx.Err()
	}
	return s.ImportFrom(ctx, ImportParams{Source: TaskSlice(tasks)})
}

// errDryRun rolls back a dry run's transaction.
var errDryRun = errors.New("dag: dry run")

// ImportFrom is Import streaming: it reads p.Source twice in one write
// transaction — first to check every task and reference, keeping a few
// integers a task and the ids, then to write each task as it reads it
// again — so that a batch of any size is added, all or nothing, in memory
// far smaller than the batch. Parents and blockers may name tasks further
// on; cycles are refused. The writing runs with foreign keys and CHECK
// constraints off, everything they would refuse having been checked
// first (they cost most of the time of a bulk insert). Errors are
// Import's; the batch must read the same both times ("the input changed").
func (s *Store) ImportFrom(ctx context.Context, p ImportParams) (int, error) {
	var n int
	err := s.writeBulk(ctx, func(t *txn) error {
		im := &importer{t: t, src: p.Source}
		if err := im.check(); err != nil || im.n == 0 {
			return err
		}
		if err := im.write(); err != nil {
			return err
		}
		if p.Added != nil {
			if err := im.readBack(p.Added); err != nil {
				return err
			}
		}
		n = im.n
		if p.DryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Status codes of an import, as the importer keeps them.
const (
	stPending byte = iota
	stDone
	stFailed
	stBlocked
)

var statusCodes = map[loop.Status]byte{"": stPending, loop.StatusInProgress: stPending,
	loop.StatusPending: stPending, loop.StatusDone: stDone, loop.StatusFailed: stFailed, loop.StatusBlocked: stBlocked}

var codeStatus = [...]loop.Status{stPending: loop.StatusPending, stDone: loop.StatusDone,
	stFailed: loop.StatusFailed, stBlocked: loop.StatusBlocked}

// importer is one import: what it keeps of the batch between its two
// passes is, per task, its id, line, status, parent and blockers as
// integers and a few counters — tens of bytes, where the task itself is
// hundreds.
type importer struct {
	t   *txn
	src TaskSource
	n   int // tasks in the batch

	ids    idTable
	line   []int32
	status []byte
	// features maps each feature named to its first task.
	features map[string]int32
	// counts are the batch's tasks by feature and status (status_counts).
	counts map[countKey]int

	// Parents and blockers. A reference is a task of the batch (>= 0), an
	// existing task (extRef(k), an index into ext) or none (-1).
	parent    []int32
	blkStart  []int32 // task i's blockers are blk[blkStart[i]:blkStart[i+1]]
	blk       []int32
	ext       []extTask
	extByName map[string]int32
	// names holds the references as read, until they are resolved.
	names      strArena
	parentName []nameRef // the tasks with a parent, and its name in names
	blkName    []int32

	// Counters of the batch's tasks, and of existing tasks.
	children, dependents []int32
	extChildren          map[int32]int32
	extDependents        map[int32]int32
	// pos is each task's place in insertion order: parents first.
	pos  []int32
	base int64 // seq of the last task before the import
}

type nameRef struct{ task, name int32 }

type countKey struct {
	feature string
	status  byte
}

// extTask is an existing task that the batch names.
type extTask struct {
	id     string
	status byte
}

func extRef(k int32) int32   { return -2 - k }
func isExt(r int32) bool     { return r <= -2 }
func extIndex(r int32) int32 { return -2 - r }

// where names task i in an error, as ImportTask.where does.
func (im *importer) where(i int32) string {
	if l := im.line[i]; l > 0 {
		return fmt.Sprintf("line %d: task %s", l, im.ids.id(i))
	}
	return fmt.Sprintf("task #%d: task %s", i+1, im.ids.id(i))
}

// name returns the id a reference names.
func (im *importer) name(r int32) string {
	if isExt(r) {
		return im.ext[extIndex(r)].id
	}
	return im.ids.id(r)
}

func (im *importer) statusOf(r int32) byte {
	if isExt(r) {
		return im.ext[extIndex(r)].status
	}
	return im.status[r]
}

// firstErr keeps the error of the earliest task, and for one task the
// first of its checks in the order Import has always made them.
type firstErr struct {
	task, rank int
	err        error
}

func (f *firstErr) add(task, rank int, err error) {
	if f.err == nil || task < f.task || (task == f.task && rank < f.rank) {
		*f = firstErr{task, rank, err}
	}
}

// Ranks of the checks of one task.
const (
	rankFeature = iota
	rankParent
	rankBlocker // + the blocker's place in blocked_by
)

// check is the first pass: it reads the batch, checks each task as the
// old in-memory Import did before opening its transaction (title, status,
// id, repeats), records ids and references, then resolves the references
// (forward ones included) against the batch and the database, and looks
// for cycles. It also works out the counters and the insertion order.
func (im *importer) check() error {
	ctx := im.t.ctx
	im.ids.init()
	im.features = map[string]int32{}
	im.counts = map[countKey]int{}
	im.blkStart = append(im.blkStart, 0)
	var bad firstErr
	var generate []int32 // tasks without an id
	for task, err := range prefetch(im.src) {
		if err != nil {
			return err
		}
		i := int32(im.n)
		if i&0xfff == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if im.n == 1<<31-2 {
			return fmt.Errorf("%s: more tasks than one import takes", task.where(im.n))
		}
		if strings.TrimSpace(task.Title) == "" {
			return fmt.Errorf("%s: a task needs a title", task.where(im.n))
		}
		code, ok := statusCodes[task.Status]
		if !ok {
			return fmt.Errorf("%s: unknown status %q (want pending, done, failed or blocked)", task.where(im.n), task.Status)
		}
		if task.ID != "" {
			if err := checkID(task.ID); err != nil {
				// The error quotes the id (its start, when too long).
				return fmt.Errorf("%s: %w", task.place(im.n), err)
			}
			if j := im.ids.find(task.ID); j >= 0 {
				return fmt.Errorf("%s: %w (also %s)", task.where(im.n), ErrDuplicateID, strings.TrimPrefix(im.where(j), "task "))
			}
		} else {
			generate = append(generate, i)
		}
		im.ids.add(task.ID)
		im.line = append(im.line, int32(task.Line))
		im.status = append(im.status, code)
		if task.Feature != "" {
			if _, seen := im.features[task.Feature]; !seen {
				im.features[task.Feature] = i
			}
		}
		im.counts[countKey{task.Feature, code}]++
		if task.ParentID != "" {
			if task.ParentID == task.ID {
				bad.add(im.n, rankParent, fmt.Errorf("%s: a task cannot be its own parent: %w", task.where(im.n), ErrCycle))
			} else {
				im.parentName = append(im.parentName, nameRef{i, im.names.add(task.ParentID)})
			}
		}
		for k, b := range task.BlockedBy {
			if b == "" || slices.Contains(task.BlockedBy[:k], b) {
				continue
			}
			if b == task.ID {
				bad.add(im.n, rankBlocker+k, fmt.Errorf("%s: a task cannot block itself: %w", task.where(im.n), ErrCycle))
				continue
			}
			im.blkName = append(im.blkName, im.names.add(b))
		}
		im.blkStart = append(im.blkStart, int32(len(im.blkName)))
		im.n++
	}
	if im.n == 0 {
		return nil
	}
	if err := im.t.row(`SELECT coalesce(max(seq), 0) FROM tasks`).Scan(&im.base); err != nil {
		return err
	}
	if err := im.generateIDs(generate); err != nil {
		return err
	}
	if err := im.resolve(&bad); err != nil {
		return err
	}
	if bad.err != nil {
		return bad.err
	}
	if i, j := im.findCycle(); i >= 0 {
		return fmt.Errorf("%s: waits for %s, which waits for it: %w", im.where(i), im.ids.id(j), ErrCycle)
	}
	im.count()
	im.order()
	im.ids.slots = nil // the second pass finds tasks by number, not by id
	return nil
}

// generateIDs gives the tasks without an id "t-<n>" from the next
// insertion number, skipping ids in the batch and in the database.
func (im *importer) generateIDs(tasks []int32) error {
	next := im.base + 1
	for _, i := range tasks {
		for {
			id := "t-" + strconv.FormatInt(next, 10)
			next++
			if im.ids.find(id) >= 0 {
				continue
			}
			if ok, err := im.t.exists(id); err != nil {
				return err
			} else if ok {
				continue
			}
			im.ids.generated(i, id)
			break
		}
	}
	return nil
}

// resolve turns the names of parents and blockers into references: to the
// batch first, then to the database; names the source dropped are
// dropped. Missing tasks and features are recorded in bad.
func (im *importer) resolve(bad *firstErr) error {
	dropped := map[string]bool{}
	for _, id := range im.src.Dropped() {
		dropped[id] = true
	}
	im.extByName = map[string]int32{}
	lookup := func(name string) (int32, bool, error) {
		if j := im.ids.find(name); j >= 0 {
			return j, true, nil
		}
		if k, ok := im.extByName[name]; ok {
			return extRef(k), k >= 0, nil
		}
		var status string
		err := im.t.row(`SELECT status FROM tasks WHERE id = ?`, name).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			im.extByName[name] = -1
			return -1, false, nil
		}
		if err != nil {
			return -1, false, err
		}
		k := int32(len(im.ext))
		im.ext = append(im.ext, extTask{id: name, status: statusCodes[loop.Status(status)]})
		im.extByName[name] = k
		return extRef(k), true, nil
	}
	for f, i := range im.features {
		err := im.t.featureExists(f)
		if errors.Is(err, loop.ErrFeatureNotFound) {
			bad.add(int(i), rankFeature, quiet(loop.ErrFeatureNotFound, "%s: feature %q does not exist", im.where(i), f))
		} else if err != nil {
			return err
		}
	}
	im.parent = make([]int32, im.n)
	for i := range im.parent {
		im.parent[i] = -1
	}
	for _, pn := range im.parentName {
		name := im.names.get(pn.name)
		r, ok, err := lookup(name)
		switch {
		case err != nil:
			return err
		case ok:
			im.parent[pn.task] = r
		case !dropped[name]:
			bad.add(int(pn.task), rankParent, quiet(loop.ErrNotFound, "%s: parent %s does not exist", im.where(pn.task), name))
		}
	}
	im.parentName = nil
	// Blockers, resolved in place; dropped ones leave.
	im.blk = make([]int32, 0, len(im.blkName))
	for i := range im.n {
		from, to := im.blkStart[i], im.blkStart[i+1]
		im.blkStart[i] = int32(len(im.blk))
		for k, bn := range im.blkName[from:to] {
			name := im.names.get(bn)
			r, ok, err := lookup(name)
			switch {
			case err != nil:
				return err
			case ok:
				im.blk = append(im.blk, r)
			case !dropped[name]:
				bad.add(i, rankBlocker+k, quiet(loop.ErrNotFound, "%s: blocker %s does not exist", im.where(int32(i)), name))
			}
		}
	}
	im.blkStart[im.n] = int32(len(im.blk))
	im.blkName, im.names = nil, strArena{}
	return nil
}

func (im *importer) blockers(i int) []int32 { return im.blk[im.blkStart[i]:im.blkStart[i+1]] }

// findCycle looks for a cycle among the batch's tasks in the waits-for
// graph (a task waits for its blockers and for its children) and returns
// an edge (i, j) closing one, or (-1, -1). The graph is built as arrays
// (no slice a task), its edges in the order the in-memory import made them
// so that the cycle reported is the same; the search is an iterative
// depth-first search, safe for long chains.
func (im *importer) findCycle() (int32, int32) {
	n := im.n
	// start[x] is where x's edges begin in adj, start[x+1] where they end.
	// Filled from the end, last task first, so that each list keeps the
	// order of the tasks that made it; the fill leaves start as it should
	// be.
	start := make([]int32, n+1)
	for i := range n {
		if p := im.parent[i]; p >= 0 {
			start[p]++
		}
		for _, b := range im.blockers(i) {
			if b >= 0 {
				start[i]++
			}
		}
	}
	for i := range n {
		start[i+1] += start[i]
	}
	adj := make([]int32, start[n])
	for i := n - 1; i >= 0; i-- {
		bs := im.blockers(i)
		for k := len(bs) - 1; k >= 0; k-- {
			if bs[k] >= 0 {
				start[i]--
				adj[start[i]] = bs[k]
			}
		}
		if p := im.parent[i]; p >= 0 {
			start[p]--
			adj[start[p]] = int32(i)
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]byte, n)
	type frame struct{ node, next int32 }
	var stack []frame
	for root := range n {
		if color[root] != white {
			continue
		}
		color[root] = grey
		stack = append(stack[:0], frame{int32(root), start[root]})
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == start[f.node+1] {
				color[f.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			j := adj[f.next]
			f.next++
			switch color[j] {
			case grey:
				return f.node, j
			case white:
				color[j] = grey
				stack = append(stack, frame{j, start[j]})
			}
		}
	}
	return -1, -1
}

// count works out the children and dependents of the batch's tasks and of
// the existing tasks it names.
func (im *importer) count() {
	im.children = make([]int32, im.n)
	im.dependents = make([]int32, im.n)
	im.extChildren = map[int32]int32{}
	im.extDependents = map[int32]int32{}
	for i := range im.n {
		switch p := im.parent[i]; {
		case p >= 0:
			im.children[p]++
		case isExt(p):
			im.extChildren[extIndex(p)]++
		}
		for _, b := range im.blockers(i) {
			if b >= 0 {
				im.dependents[b]++
			} else {
				im.extDependents[extIndex(b)]++
			}
		}
	}
}

// order sets pos: the batch's order, but each parent in the batch before
// its first child (and its own parent before it, and so on up).
func (im *importer) order() {
	im.pos = make([]int32, im.n)
	for i := range im.pos {
		im.pos[i] = -1
	}
	var chain []int32
	next := int32(0)
	for i := range im.n {
		chain = chain[:0]
		for x := int32(i); x >= 0 && im.pos[x] == -1; x = im.parent[x] {
			im.pos[x] = -2 // on the chain; the batch has no cycle
			chain = append(chain, x)
		}
		for k := len(chain) - 1; k >= 0; k-- {
			im.pos[chain[k]] = next
			next++
		}
	}
}

// write is the second pass: it reads the batch again and inserts each task
// at its place (seq) with its counters, and its dependencies, many rows a
// statement. Then it counts the batch's children and dependents on the
// existing tasks, and looks for cycles through them.
func (im *importer) write() error {
	t := im.t
	// The driver cuts the per-row work of the inserts to what the import
	// needs, for this transaction only (sqliteDialect.tuneImport).
	undo, restore, err := t.s.d.tuneImport(im)
	if err != nil {
		return err
	}
	defer undo()
	chains, err := im.chains()
	if err != nil {
		return err
	}
	// OR FAIL: on an error, rows already inserted by the statement stay;
	// the whole transaction is rolled back then anyway.
	// Binding a text costs an allocation and a copy: the status is bound
	// as its number, and the times, the same for every row, are written
	// into the statement.
	now := strconv.FormatInt(t.now, 10)
	tasks := newBulkInsert(t, `INSERT OR FAIL INTO tasks (seq, id, title, description, status, priority, parent_id, feature,
		created_at, updated_at, unmet_blockers, child_count, parent_failed, blocker_count, dependent_count, check_cmd, check_by, chain) VALUES `,
		`(?, ?, ?, ?, CASE CAST(? AS INTEGER) WHEN 0 THEN 'pending' WHEN 1 THEN 'done' WHEN 2 THEN 'failed' ELSE 'blocked' END,
		?, ?, ?, `+now+`, `+now+`, ?, ?, ?, ?, ?, ?, ?, ?)`, 16, 64)
	deps := newBulkInsert(t, `INSERT OR FAIL INTO deps (blocked_id, blocker_id) VALUES `, `(?, ?)`, 2, 256)
	var batch []int32 // the tasks in tasks' pending rows
	flushTasks := func() error {
		// The transaction must survive a failed insert for the look-up
		// of the duplicate id (dialect.guardStatement).
		var err error
		if len(batch) > 0 {
			err = t.s.d.guardStatement(t, tasks.flush)
		} else {
			err = tasks.flush()
		}
		if err != nil {
			err = im.duplicate(batch, err)
		}
		batch = batch[:0]
		return err
	}
	changed := errors.New("dag: the input changed while it was imported; nothing was")
	i := 0
	for task, err := range prefetch(im.src) {
		if err != nil {
			return err
		}
		if i&0xfff == 0 {
			if err := t.ctx.Err(); err != nil {
				return err
			}
		}
		if i >= im.n || (task.ID != "" && !im.ids.is(int32(i), task.ID)) {
			return changed
		}
		id := task.ID
		if id == "" {
			id = im.ids.id(int32(i))
		}
		parent := ""
		pfailed := 0
		if p := im.parent[i]; p != -1 {
			parent = im.name(p)
			if im.statusOf(p) == stFailed {
				pfailed = 1
			}
		}
		blockers := im.blockers(i)
		unmet := 0
		for _, b := range blockers {
			if im.statusOf(b) != stDone {
				unmet++
			}
		}
		if tasks.full() {
			if err := flushTasks(); err != nil {
				return err
			}
		}
		batch = append(batch, int32(i))
		if err := tasks.add(im.base+1+int64(im.pos[i]), id, task.Title, task.Description, int64(im.status[i]),
			task.Priority, nullIfEmpty(parent), nullIfEmpty(task.Feature), unmet, im.children[i], pfailed,
			len(blockers), im.dependents[i], task.Check, checkAuthor(task.Check, task.CheckBy), chains[i]); err != nil {
			return err
		}
		i++
	}
	if i != im.n {
		return changed
	}
	if err := flushTasks(); err != nil {
		return err
	}
	// The dependencies need nothing of the input but what the first pass
	// kept; written after the tasks, their indexes and the tasks' do not
	// compete for the page cache.
	for i := range im.n {
		id := ""
		for _, b := range im.blockers(i) {
			if id == "" {
				id = im.ids.id(int32(i))
			}
			if err := deps.add(id, im.name(b)); err != nil {
				return err
			}
		}
	}
	if err := deps.flush(); err != nil {
		return err
	}
	if err := restore(); err != nil {
		return err
	}
	for k, c := range im.extChildren {
		if _, err := t.exec(`UPDATE tasks SET child_count = child_count + ? WHERE id = ?`, c, im.ext[k].id); err != nil {
			return err
		}
	}
	for k, c := range im.extDependents {
		if _, err := t.exec(`UPDATE tasks SET dependent_count = dependent_count + ? WHERE id = ?`, c, im.ext[k].id); err != nil {
			return err
		}
	}
	// A cycle can also run through the database: a batch task waits for an
	// existing task that, through an existing parent, waits for a batch
	// task. Only then is the (slower) check in SQL needed.
	if len(im.extDependents) > 0 && len(im.extChildren) > 0 {
		for i := range im.n {
			for _, b := range im.blockers(i) {
				if !isExt(b) {
					continue
				}
				cyc, err := t.reaches(im.name(b), im.ids.id(int32(i)))
				if err != nil {
					return err
				}
				if cyc {
					return fmt.Errorf("%s: blocker %s waits for it through existing tasks: %w", im.where(int32(i)), im.name(b), ErrCycle)
				}
			}
		}
	}
	// The existing tasks the batch's tasks now wait for: their chains,
	// and those of what leads to them, may be longer (after the cycle
	// check: updateChains walks an acyclic graph).
	blockers := make([]string, 0, len(im.extDependents))
	for k := range im.extDependents {
		blockers = append(blockers, im.ext[k].id)
	}
	slices.Sort(blockers) // the same writes in the same order every time
	return t.updateChains(blockers...)
}

// duplicate turns the failure of an insert of the tasks in batch into the
// error naming the first of them whose id is already a task (the batch's
// ids are distinct: the first pass saw to that).
func (im *importer) duplicate(batch []int32, err error) error {
	if !im.t.s.d.isUnique(err) {
		return err
	}
	for _, i := range batch {
		// OR FAIL kept the statement's rows before the failing one.
		var n int
		if xerr := im.t.row(`SELECT count(*) FROM tasks WHERE id = ? AND seq <= ?`, im.ids.id(i), im.base).Scan(&n); xerr != nil {
			return xerr
		} else if n > 0 {
			return fmt.Errorf("%s: %w", im.where(i), ErrDuplicateID)
		}
	}
	return err
}

// dropCountTrigger drops the trigger that counts tasks by status as they
// are inserted and returns what puts it back, with the counts of the
// batch added: the trigger's own SQL, read from the schema. SQLite's
// driver calls it (sqliteDialect.tuneImport); a server's trigger counts
// as rows come and stays.
func (im *importer) dropCountTrigger() (restore func() error, err error) {
	t := im.t
	var q string
	err = t.row(`SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = 'tasks_count_insert'`).Scan(&q)
	if errors.Is(err, sql.ErrNoRows) {
		return func() error { return nil }, nil // a schema without it: nothing to keep
	}
	if err != nil {
		return nil, err
	}
	if _, err := t.w.c.(driver.ExecerContext).ExecContext(t.ctx, `DROP TRIGGER tasks_count_insert`, nil); err != nil {
		return nil, err
	}
	return func() error {
		for k, n := range im.counts {
			if _, err := t.exec(`INSERT INTO status_counts (feature, status, n) VALUES (?, ?, ?)
				ON CONFLICT (feature, status) DO UPDATE SET n = n + excluded.n`, k.feature, string(codeStatus[k.status]), n); err != nil {
				return err
			}
		}
		_, err := t.w.c.(driver.ExecerContext).ExecContext(t.ctx, q, nil)
		return err
	}, nil
}

// readBack calls fn with each task the import added, in insertion order.
func (im *importer) readBack(fn func(ImportTask) error) error {
	task := make([]int32, im.n) // the task at each place
	for i, p := range im.pos {
		task[p] = int32(i)
	}
	at := 0
	fnErr, err := listTasks(im.t.ctx, im.t.w, ListParams{}, im.base, func(t loop.Task) error {
		line := 0
		if at < len(task) {
			line = int(im.line[task[at]])
		}
		at++
		return fn(ImportTask{Line: line, ID: t.ID, Title: t.Title, Description: t.Description, Priority: t.Priority,
			ParentID: t.ParentID, BlockedBy: t.BlockedBy, Status: t.Status, Feature: t.Feature,
			Check: t.Check, CheckBy: t.CheckBy})
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// bulkInsert inserts rows many at a time: one statement a row cost an
// import more than the rows' own writing.
type bulkInsert struct {
	t          *txn
	head, row  string // row has cols parameters
	cols, rows int
	args       []any
}

func newBulkInsert(t *txn, head, row string, cols, rows int) *bulkInsert {
	return &bulkInsert{t: t, head: head, row: row, cols: cols, rows: rows, args: make([]any, 0, cols*rows)}
}

func (b *bulkInsert) full() bool { return len(b.args) == b.cols*b.rows }

// add adds a row, flushing first when the statement is full.
func (b *bulkInsert) add(vals ...any) error {
	if b.full() {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.args = append(b.args, vals...)
	return nil
}

func (b *bulkInsert) flush() error {
	rows := len(b.args) / b.cols
	if rows == 0 {
		return nil
	}
	q := b.head + strings.TrimSuffix(strings.Repeat(b.row+",", rows), ",")
	_, err := b.t.exec(q, b.args...)
	b.args = b.args[:0]
	return err
}

// idTable holds the batch's ids in one byte arena, indexed by an
// open-addressing hash table of task numbers: a million ids take some 20
// MB, where a map of strings takes several times that.
type idTable struct {
	arena []byte
	off   []uint32 // id i is arena[off[i]:off[i+1]]
	slots []int32  // task+1, 0 for none
	used  int
	seed  maphash.Seed
	gen   map[int32]string // generated ids, of tasks that had none
}

func (t *idTable) init() {
	t.off = []uint32{0}
	t.slots = make([]int32, 1024)
	t.seed = maphash.MakeSeed()
}

// id returns task i's id.
func (t *idTable) id(i int32) string {
	if s, ok := t.gen[i]; ok {
		return s
	}
	return string(t.arena[t.off[i]:t.off[i+1]])
}

func (t *idTable) is(i int32, id string) bool {
	if s, ok := t.gen[i]; ok {
		return s == id
	}
	return string(t.arena[t.off[i]:t.off[i+1]]) == id
}

// find returns the task with this id, or -1.
func (t *idTable) find(id string) int32 {
	mask := uint64(len(t.slots) - 1)
	for h := maphash.String(t.seed, id) & mask; ; h = (h + 1) & mask {
		s := t.slots[h]
		if s == 0 {
			return -1
		}
		if t.is(s-1, id) {
			return s - 1
		}
	}
}

// add appends the next task's id ("" for one to generate, not indexed).
func (t *idTable) add(id string) {
	i := int32(len(t.off) - 1)
	t.arena = append(t.arena, id...)
	t.off = append(t.off, uint32(len(t.arena)))
	if id != "" {
		t.index(i, id)
	}
}

// generated gives task i a generated id.
func (t *idTable) generated(i int32, id string) {
	if t.gen == nil {
		t.gen = map[int32]string{}
	}
	t.gen[i] = id
	t.index(i, id)
}

func (t *idTable) index(i int32, id string) {
	if (t.used+1)*2 > len(t.slots) {
		old := t.slots
		t.slots = make([]int32, 2*len(old))
		t.used = 0
		for _, s := range old {
			if s != 0 {
				t.put(s-1, t.hash(s-1))
			}
		}
	}
	t.put(i, maphash.String(t.seed, id))
}

// hash is the hash of task i's id.
func (t *idTable) hash(i int32) uint64 {
	if s, ok := t.gen[i]; ok {
		return maphash.String(t.seed, s)
	}
	return maphash.Bytes(t.seed, t.arena[t.off[i]:t.off[i+1]])
}

func (t *idTable) put(i int32, hash uint64) {
	mask := uint64(len(t.slots) - 1)
	h := hash & mask
	for t.slots[h] != 0 {
		h = (h + 1) & mask
	}
	t.slots[h] = i + 1
	t.used++
}

// strArena holds strings in one byte slice.
type strArena struct {
	b   []byte
	off []uint32
}

func (a *strArena) add(s string) int32 {
	if a.off == nil {
		a.off = []uint32{0}
	}
	a.b = append(a.b, s...)
	a.off = append(a.off, uint32(len(a.b)))
	return int32(len(a.off) - 2)
}

func (a *strArena) get(i int32) string { return string(a.b[a.off[i]:a.off[i+1]]) }

// prefetch is src.Tasks run in a goroutine of its own, batches of tasks
// ahead of its reader: reading and decoding the input then overlap with
// writing it. Slices are read as they are.
func prefetch(src TaskSource) iter.Seq2[ImportTask, error] {
	if _, ok := src.(TaskSlice); ok {
		return src.Tasks()
	}
	return func(yield func(ImportTask, error) bool) {
		type batch struct {
			tasks []ImportTask
			err   error
		}
		const size = 256
		ch := make(chan batch, 4)
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(ch)
			send := func(b batch) bool {
				select {
				case ch <- b:
					return true
				case <-done:
					return false
				}
			}
			b := batch{tasks: make([]ImportTask, 0, size)}
			for t, err := range src.Tasks() {
				if err != nil {
					b.err = err
					send(b)
					return
				}
				if b.tasks = append(b.tasks, t); len(b.tasks) == size {
					if !send(b) {
						return
					}
					b = batch{tasks: make([]ImportTask, 0, size)}
				}
			}
			send(b)
		}()
		// Stop the reader when the loop ends early; wait for it in any
		// case, so that the source's pass is over (Dropped) on return.
		defer wg.Wait()
		defer close(done)
		for b := range ch {
			for _, t := range b.tasks {
				if !yield(t, nil) {
					return
				}
			}
			if b.err != nil {
				yield(ImportTask{}, b.err)
				return
			}
		}
	}
}

// chains computes the chain (dag/chain.go) of each of the batch's tasks:
// what waits for a task of the batch is in the batch too, but for an
// existing parent, whose chain is read. The batch's graph is walked from
// the tasks nothing waits for back to their predecessors (blockers and
// children), each task once all its successors are done (Kahn's
// algorithm), in arrays: a million tasks take a few hundred milliseconds.
func (im *importer) chains() ([]int32, error) {
	n := im.n
	chain := make([]int32, n)
	waiting := make([]int32, n) // successors not yet walked
	// children[cStart[p]:cStart[p+1]] are p's children in the batch.
	cStart := make([]int32, n+1)
	extChain := map[int32]int32{}
	for i := range n {
		chain[i] = 1
		waiting[i] = im.dependents[i]
		switch p := im.parent[i]; {
		case p >= 0:
			waiting[i]++
			cStart[p+1]++
		case isExt(p):
			c, ok := extChain[p]
			if !ok {
				var read int
				if err := im.t.row(`SELECT chain FROM tasks WHERE id = ?`, im.name(p)).Scan(&read); err != nil {
					return nil, err
				}
				c = int32(read)
				extChain[p] = c
			}
			chain[i] = 1 + c
		}
	}
	for p := range n {
		cStart[p+1] += cStart[p]
	}
	children := make([]int32, cStart[n])
	fill := slices.Clone(cStart[:n])
	for i := range n {
		if p := im.parent[i]; p >= 0 {
			children[fill[p]] = int32(i)
			fill[p]++
		}
	}
	queue := make([]int32, 0, n)
	for i := range n {
		if waiting[i] == 0 {
			queue = append(queue, int32(i))
		}
	}
	pass := func(pred, x int32) {
		chain[pred] = max(chain[pred], chain[x]+1)
		if waiting[pred]--; waiting[pred] == 0 {
			queue = append(queue, pred)
		}
	}
	for k := 0; k < len(queue); k++ {
		x := queue[k]
		for _, b := range im.blockers(int(x)) {
			if b >= 0 {
				pass(b, x)
			}
		}
		for _, c := range children[cStart[x]:cStart[x+1]] {
			pass(c, x)
		}
	}
	if len(queue) != n {
		return nil, fmt.Errorf("dag: import: %d tasks wait for one another in a cycle", n-len(queue))
	}
	return chain, nil
}
