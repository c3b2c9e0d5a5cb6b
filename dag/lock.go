package dag

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ralph-dev/ralph/safefile"
)

// writeLock orders the writers of one database: a semaphore for the
// goroutines of this process and, where the platform has flock(2), an
// exclusive lock on the file <db>-lock for other processes.
//
// SQLite alone would do (BEGIN IMMEDIATE under busy_timeout), but its
// busy handler polls with sleeps of 1, 2, 5, 10 … ms, so with several
// processes claiming at once the lock sits free while every waiter sleeps;
// measured on 8 processes, the kernel queue of flock roughly multiplies
// the aggregate claim rate (see the README figures). Programs that do not
// take this lock (the sqlite3 shell, an older ralph) still meet SQLite's
// own locking and the busy timeout, so correctness never depends on it.
type writeLock struct {
	sem  chan struct{}
	file *os.File // nil where flock is unavailable or the file cannot be opened
}

// newWriteLock returns the lock of the database at dbPath; "" for a lock
// inside this process only (a Store on a server, whose write
// transactions take the plan's lock on the server).
func newWriteLock(dbPath string) *writeLock {
	l := &writeLock{sem: make(chan struct{}, 1)}
	if flockSupported && dbPath != "" {
		// Beside the database, in .ralph/: a link planted there is not
		// followed (package safefile), so no file is made elsewhere.
		if f, err := safefile.Append(filepath.Dir(dbPath), dbPath+"-lock", 0o644); err == nil {
			l.file = f
		}
	}
	return l
}

func (l *writeLock) close() {
	if l.file != nil {
		l.file.Close()
	}
}

// acquire takes the lock, waiting at most timeout; it fails with lockErr
// on timeout and with the context's error when ctx ends first. release
// gives the lock back; its argument, if not nil, runs once other processes
// may write again but before other goroutines of this one may.
func (l *writeLock) acquire(ctx context.Context, timeout time.Duration, lockErr func() error) (release func(between func()), err error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case l.sem <- struct{}{}:
	default:
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, lockErr()
		}
	}
	if l.file == nil {
		return func(between func()) {
			if between != nil {
				between()
			}
			<-l.sem
		}, nil
	}
	release = func(between func()) {
		if err := funlock(l.file); err != nil {
			// Unlocking a file we hold cannot fail short of a bad
			// descriptor; closing it drops the lock in any case.
			l.file.Close()
			l.file = nil
		}
		if between != nil {
			between()
		}
		<-l.sem
	}
	if ok, err := tryFlock(l.file); err != nil {
		<-l.sem
		return nil, fmt.Errorf("dag: lock %s: %w", l.file.Name(), err)
	} else if ok {
		return release, nil
	}
	done := make(chan error, 1)
	go func() { done <- flock(l.file) }()
	abandon := func() {
		// The blocked flock call cannot be interrupted: let it finish,
		// then give the lock straight back.
		go func() {
			if err := <-done; err == nil {
				funlock(l.file)
			}
			<-l.sem
		}()
	}
	select {
	case err := <-done:
		if err != nil {
			<-l.sem
			return nil, fmt.Errorf("dag: lock %s: %w", l.file.Name(), err)
		}
		return release, nil
	case <-ctx.Done():
		abandon()
		return nil, ctx.Err()
	case <-timer.C:
		abandon()
		return nil, lockErr()
	}
}
