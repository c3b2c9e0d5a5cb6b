package agentproc

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
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
