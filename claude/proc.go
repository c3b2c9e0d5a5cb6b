package claude

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// activityReader reads the agent's stdout (or stderr), copies every byte to
// the raw log as it arrives, and records when output last came for the
// idle timeout, and since when a Read has been waiting for output.
type activityReader struct {
	r       io.Reader
	log     io.Writer
	start   time.Time
	last    atomic.Int64 // nanoseconds since start of the last read with data
	waiting atomic.Int64 // nanoseconds since start when the pending Read began, plus one; 0: none pending
	logErr  error        // the first failed write to log; nothing is written after it
}

func (a *activityReader) Read(p []byte) (int, error) {
	a.waiting.Store(int64(time.Since(a.start)) + 1)
	n, err := a.r.Read(p)
	a.waiting.Store(0)
	if n > 0 {
		a.last.Store(int64(time.Since(a.start)))
		if a.log != nil && a.logErr == nil {
			if _, werr := a.log.Write(p[:n]); werr != nil {
				a.logErr = werr
			}
		}
	}
	return n, err
}

// quietFor returns how long no output has come.
func (a *activityReader) quietFor() time.Duration {
	return time.Since(a.start) - time.Duration(a.last.Load())
}

// readWait returns how long the pending Read has been waiting for output,
// counted from since at the earliest; zero when no Read is pending (the
// reader is busy with what it has read).
func (a *activityReader) readWait(since time.Time) time.Duration {
	w := a.waiting.Load()
	if w == 0 {
		return 0
	}
	began := a.start.Add(time.Duration(w - 1))
	if began.Before(since) {
		began = since
	}
	return time.Since(began)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimRight(string(t.buf), "\n")
}

// drainStderr reads r to the end, keeping its tail and reporting each line
// (a line longer than the buffer is reported in pieces).
func drainStderr(r io.Reader, tail *tailBuffer, line func(string)) {
	br := bufio.NewReaderSize(r, 4<<10)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			_, _ = tail.Write(chunk)
			if s := strings.TrimRight(string(chunk), "\r\n"); s != "" {
				line(s)
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// signalGroup sends sig to every process of the group pgid.
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
}

// termGroup asks every process of the group pgid to end: SIGTERM, then
// SIGCONT, since a stopped process (state T: a debugger, a job-control
// stop, a hook that ran `kill -STOP $PPID`) acts on SIGTERM only once it
// runs again.
func termGroup(pgid int) {
	signalGroup(pgid, syscall.SIGTERM)
	signalGroup(pgid, syscall.SIGCONT)
}

// groupAlive reports whether any live process of the group pgid is left.
// Zombies do not count: a grandchild orphaned to an init that does not reap
// (as in some containers) is dead all the same.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc: trust kill
	}
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		data, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}

// reapGroup stops what is left of the process group pgid once its leader
// has exited: SIGTERM (unless termed: it was sent already), then SIGKILL if
// something is still there at killAt. It returns at once when the group is
// already empty, which is the common case.
func reapGroup(pgid int, killAt time.Time, termed bool) {
	if !groupAlive(pgid) {
		return
	}
	if !termed {
		termGroup(pgid)
	}
	for time.Now().Before(killAt) {
		time.Sleep(10 * time.Millisecond)
		if !groupAlive(pgid) {
			return
		}
	}
	signalGroup(pgid, syscall.SIGKILL)
	// SIGKILL is delivered asynchronously, and on a busy machine the
	// processes may still be running for a moment: wait (boundedly) until
	// the kernel has taken them down, so that Run returns with the group
	// gone.
	for deadline := time.Now().Add(killWait); groupAlive(pgid) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// killWait bounds the wait for SIGKILLed processes to disappear.
const killWait = 2 * time.Second
