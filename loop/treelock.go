package loop

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/ralph-dev/ralph/safefile"
)

// One writing build per working tree (ARCHITECTURE.md §3.4, DESIGN §14).
//
// A run that snapshots or commits the project's own tree — Verify (the
// verifier's tree guard restores the tree it saw) or Commit (the commit
// gate stages every change) — needs that tree alone: another build's agent
// writing there meanwhile would have its files restored away, or swept
// into a commit that is not its own. So every run in Root (no Workspace)
// takes the lock file <Root>/.ralph/tree.lock with flock(2) before its
// first agent, without waiting for another build: a writing run
// exclusively, any other run shared (a plain run tries a lock held alone
// again for some milliseconds: see acquireTree). A run that cannot take it ends at once with a *TreeBusyError
// (OutcomeError), before it writes a log. Plain runs share the tree as
// before (many loops on one plan); a worker's run (Workspace set) works in
// a tree of its own and takes no lock. Plan and prompt mode take part as
// build mode does: with Commit they commit the tree and need it alone,
// without it they run agents there and share it.
//
// The lock is the kernel's: it goes with the open file, so a run that
// ends — returns, panics, or is killed — gives it up, and a dead process
// never blocks a build. The file also holds a record of its holders, one
// JSON line each (holder, start, agent), for the refusal's message: a
// writing holder empties the file and writes its own; a shared holder
// appends its own, and the first one in a free tree empties it first, so
// that the file stays small. The record is a message, never trusted: the
// lock alone decides. The file is opened with package safefile (a link at
// its name is refused: an agent can write .ralph/ unsandboxed) and is
// never removed (removing a lock file that another process has open
// would let a third lock a new file beside it).
//
// Limits: flock is advisory, between ralph builds; an agent that runs
// without the sandbox can remove the file, as it can write the tree.
// Where there is no flock (Windows), runs are not kept apart (treeLocks
// is false) and the rule is the user's to keep.

// treeLockName is the lock file under <Root>/.ralph.
const treeLockName = "tree.lock"

// treeRecordLimit bounds what is read of the lock file's records.
const treeRecordLimit = 64 << 10

// ErrTreeBusy is wrapped by a *TreeBusyError: a run refused because
// another build holds its working tree.
var ErrTreeBusy = errors.New("loop: the working tree is held by another build")

// TreeHolder is a build found holding a working tree.
type TreeHolder struct {
	// Holder is the ralph process that runs it.
	Holder Holder `json:"-"`
	// Writing: it verifies or commits, and holds the tree alone.
	Writing bool `json:"writing,omitempty"`
	// Started is when it took the tree.
	Started time.Time `json:"started"`
	// AgentID is its agent id.
	AgentID string `json:"agent,omitempty"`
}

// treeRecord is a TreeHolder as the lock file holds it.
type treeRecord struct {
	TreeHolder
	Holder string `json:"holder"`
}

// TreeBusyError is why a run did not start: another build holds its
// working tree (the Config's Root). It wraps ErrTreeBusy.
type TreeBusyError struct {
	// Root is the tree.
	Root string
	// Writing: the refused run verifies or commits, so it needs the tree
	// alone, and another build runs agents there. Otherwise a writing
	// build holds it.
	Writing bool
	// Holders are the builds the lock file names, those known to have
	// ended left out; it may be empty (a holder that has not yet written
	// its record) and, where a holder's process cannot be checked (another
	// host, a system without /proc), name one that ended.
	Holders []TreeHolder
}

func (e *TreeBusyError) Error() string {
	who := describeTreeHolders(e.Holders)
	writer := !e.Writing || slices.ContainsFunc(e.Holders, func(h TreeHolder) bool { return h.Writing })
	switch {
	case writer:
		return fmt.Sprintf("loop: a build that verifies or commits holds %s (%s): no other build runs in the tree until it ends", e.Root, who)
	case len(e.Holders) > 1:
		return fmt.Sprintf("loop: other builds run agents in %s (%s): a build that verifies or commits needs the tree alone; wait until they end", e.Root, who)
	}
	return fmt.Sprintf("loop: another build runs agents in %s (%s): a build that verifies or commits needs the tree alone; wait until it ends", e.Root, who)
}

// Unwrap is ErrTreeBusy.
func (e *TreeBusyError) Unwrap() error { return ErrTreeBusy }

// describeTreeHolders names the holders for people: "pid 42 on this host,
// started 2026-01-02 15:04:05 UTC, agent-…", at most three, then how many
// more.
func describeTreeHolders(hs []TreeHolder) string {
	if len(hs) == 0 {
		return "it has not said which yet"
	}
	return listSome(hs, 3, "; ", func(h TreeHolder) string {
		s := DescribeHolder(h.Holder)
		if !h.Started.IsZero() {
			s += ", started " + h.Started.Local().Format("2006-01-02 15:04:05 MST")
		}
		if h.AgentID != "" {
			s += ", " + h.AgentID
		}
		return s
	})
}

// treeLock is a hold on a working tree; release gives it up.
type treeLock struct {
	f  *os.File
	me TreeHolder
}

// release gives the tree up. Its record stays in the file (the next
// holder of a free tree empties it): the tree is left as the run saw it.
func (l *treeLock) release() {
	if l == nil || l.f == nil {
		return
	}
	liveHolds.Delete(holdKey(l.me))
	l.f.Close() // closing the file ends the flock
}

// liveHolds are the holds of this process's runs now: a record of this
// process whose run ended is known to have ended though the process
// lives (several runs in one process).
var liveHolds sync.Map

func holdKey(h TreeHolder) string {
	return h.Holder.String() + " " + h.AgentID + " " + h.Started.Format(time.RFC3339Nano)
}

// lockTree takes root's tree lock for me: exclusively when me.Writing,
// else shared, never waiting. A tree another build holds is a
// *TreeBusyError; any other error is the lock file's.
func lockTree(root string, me TreeHolder) (*treeLock, error) {
	d, err := safefile.MkdirAllDir(root, ".ralph", 0o755)
	if err != nil {
		return nil, fmt.Errorf("loop: tree lock: %w", err)
	}
	f, err := d.Append(treeLockName, 0o644)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("loop: tree lock: %w", err)
	}
	ok, err := acquireTree(f, me)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("loop: tree lock %s: %w", f.Name(), err)
	}
	if !ok {
		busy := &TreeBusyError{Root: root, Writing: me.Writing, Holders: treeHolders(f, me.Writing)}
		f.Close()
		return nil, busy
	}
	if treeLocks {
		liveHolds.Store(holdKey(me), true)
	}
	return &treeLock{f: f, me: me}, nil
}

// acquireTree takes the lock on f and writes me's record; ok is false when
// another build holds it.
func acquireTree(f *os.File, me TreeHolder) (ok bool, err error) {
	if !treeLocks {
		return true, nil
	}
	if me.Writing {
		if ok, err = tryLock(f, true); !ok || err != nil {
			return false, err
		}
		// The tree is free: the records are of builds that ended.
		if err := f.Truncate(0); err != nil {
			return false, err
		}
		return true, writeTreeRecord(f, me)
	}
	// A plain run shares the tree. Another plain run holds the lock alone
	// for an instant when it finds the tree free (below), so a lock held
	// alone is tried again a few times before this run gives up: a
	// writing build holds it for its whole run.
	for try := range plainTries {
		if try > 0 {
			time.Sleep(time.Millisecond)
		}
		if ok, err = sharePlain(f); ok || err != nil {
			break
		}
	}
	if !ok || err != nil {
		return false, err
	}
	return true, writeTreeRecord(f, me)
}

// plainTries bounds a plain run's tries at a tree held alone.
const plainTries = 20

// sharePlain tries once to take f's lock shared. When it can take it alone
// the tree is free, and it empties the records (of builds that ended)
// before going down to shared. flock's conversion is not atomic: another
// build may take the lock in between, and then ok is false.
func sharePlain(f *os.File) (ok bool, err error) {
	if ok, err = tryLock(f, true); err != nil {
		return false, err
	}
	if ok {
		if err := f.Truncate(0); err != nil {
			return false, err
		}
	}
	return tryLock(f, false)
}

// writeTreeRecord appends me's record to f, in one write (O_APPEND: the
// lines of shared holders do not mix).
func writeTreeRecord(f *os.File, me TreeHolder) error {
	line, err := json.Marshal(treeRecord{TreeHolder: me, Holder: me.Holder.String()})
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	return err
}

// treeHolders reads the holders the lock file f names: the writing one
// when writing is false (a writing build holds the tree), every one
// otherwise; those known to have ended are left out. A holder that took
// the lock an instant ago may not have written its record yet: an empty
// list is read again a few times, briefly.
func treeHolders(f *os.File, writing bool) []TreeHolder {
	for range 10 {
		if hs := readTreeHolders(f, writing); len(hs) > 0 {
			return hs
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func readTreeHolders(f *os.File, writing bool) []TreeHolder {
	var hs []TreeHolder
	sc := bufio.NewScanner(io.NewSectionReader(f, 0, treeRecordLimit))
	for sc.Scan() {
		var rec treeRecord
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue // a line being written, or not ralph's
		}
		if !plainText(rec.Holder) || !plainText(rec.AgentID) {
			continue // not a record ralph wrote: an agent can write the file
		}
		h, err := ParseHolder(rec.Holder)
		if err != nil || h.IsZero() || h.Liveness() == HolderGone || (!writing && !rec.Writing) {
			continue
		}
		rec.TreeHolder.Holder = h
		if _, live := liveHolds.Load(holdKey(rec.TreeHolder)); h == ThisProcess() && !live {
			continue // a run of this process that ended
		}
		hs = append(hs, rec.TreeHolder)
	}
	return hs
}

// holdTree takes the run's tree lock (see lockTree): none for a worker's
// run, which has a tree of its own. The lock is released by release,
// which Run calls on its way out.
func (r *run) holdTree() (*treeLock, *stop) {
	if r.cfg.Workspace != nil {
		return nil, nil
	}
	me := TreeHolder{Holder: r.cfg.Holder, Writing: r.cfg.Commit || r.cfg.Verify, Started: r.cfg.Now().UTC(), AgentID: r.cfg.AgentID}
	l, err := lockTree(r.cfg.Root, me)
	if err != nil {
		return nil, internal(err)
	}
	return l, nil
}

// plainText reports whether a record's field is one ralph could have
// written: short, with printable characters only (a message shows it).
func plainText(s string) bool {
	return len(s) <= 200 && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) && r != ' ' })
}
