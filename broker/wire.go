package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ralph-dev/ralph/loop"
)

// The operations of the protocol: one per store method the broker serves.
const (
	opGet      = "get"
	opLogs     = "logs"
	opReady    = "ready"
	opActive   = "active"
	opCounts   = "counts"
	opList     = "list"
	opClaim    = "claim"
	opComplete = "complete"
	opFail     = "fail"
	opAdd      = "add"
	opDepAdd   = "dep-add"
	opNote     = "note"
)

// writes are the operations that change the plan: a read-only session
// (the verifier's) is refused them.
var writes = map[string]bool{opClaim: true, opComplete: true, opFail: true, opAdd: true, opDepAdd: true, opNote: true}

// request is one line the client sends.
type request struct {
	Op string `json:"op"`
	// ID is the task of get and logs.
	ID string `json:"id,omitempty"`
	// Limit bounds ready (<= 0: all).
	Limit int `json:"limit,omitempty"`
	// Scope narrows ready, active and counts.
	Scope loop.Scope `json:"scope"`
	// Claim holds claim's arguments; the broker sets Holder and Mode.
	Claim *loop.ClaimParams `json:"claim,omitempty"`
	// Move holds complete's, fail's and note's.
	Move *loop.MoveParams `json:"move,omitempty"`
	// Task holds add's.
	Task *loop.NewTask `json:"task,omitempty"`
	// Blocked and Blocker are dep-add's.
	Blocked string `json:"blocked,omitempty"`
	Blocker string `json:"blocker,omitempty"`
	// List holds list's query; Shape asks for the shape frame.
	List *listQuery `json:"list,omitempty"`
}

type listQuery struct {
	Status  loop.Status `json:"status,omitempty"`
	Feature string      `json:"feature,omitempty"`
	Limit   int         `json:"limit,omitempty"`
	Shape   bool        `json:"shape,omitempty"`
}

// frame is one line the broker sends. A request is answered by any
// number of frames with Task (list) or Shape set, and ends with a frame
// that has End or Err set.
type frame struct {
	Err    *wireError      `json:"error,omitempty"`
	End    bool            `json:"end,omitempty"`
	Task   *loop.Task      `json:"task,omitempty"`
	Tasks  []loop.Task     `json:"tasks,omitempty"`
	Logs   []loop.LogEntry `json:"logs,omitempty"`
	Counts *loop.Counts    `json:"counts,omitempty"`
	Shape  *loop.ListShape `json:"shape,omitempty"`
}

// wireError is an error as it crosses the socket: its message exactly,
// and the sentinels it wraps by name, so that errors.Is holds on the
// client's side as it did on the broker's.
type wireError struct {
	Message    string                `json:"message"`
	Kinds      []string              `json:"kinds,omitempty"`
	Temporary  bool                  `json:"temporary,omitempty"`
	Transition *loop.TransitionError `json:"transition,omitempty"`
	Held       *loop.HeldError       `json:"held,omitempty"`
	Refusal    *RefusalError         `json:"refusal,omitempty"`
}

// kinds names the sentinel errors that cross the socket.
var kinds = []struct {
	name string
	err  error
}{
	{"not-found", loop.ErrNotFound},
	{"no-ready-task", loop.ErrNoReadyTask},
	{"not-ready", loop.ErrNotReady},
	{"not-holder", loop.ErrNotHolder},
	{"loop-claim", loop.ErrLoopClaim},
	{"stale-claim", loop.ErrStaleClaim},
	{"held-by-live-agent", loop.ErrHeldByLiveAgent},
	{"feature-not-found", loop.ErrFeatureNotFound},
	{"refused", ErrRefused},
	{"unsupported", ErrUnsupported},
	{"canceled", context.Canceled},
	{"deadline-exceeded", context.DeadlineExceeded},
}

func encodeError(err error) *wireError {
	w := &wireError{Message: err.Error()}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			w.Kinds = append(w.Kinds, k.name)
		}
	}
	var tmp interface{ Temporary() bool }
	w.Temporary = errors.As(err, &tmp) && tmp.Temporary()
	var te *loop.TransitionError
	if errors.As(err, &te) {
		w.Transition = te
	}
	var he *loop.HeldError
	if errors.As(err, &he) {
		w.Held = he
	}
	var re *RefusalError
	if errors.As(err, &re) {
		w.Refusal = re
	}
	return w
}

// remoteError is an error the broker returned: its message is the
// store's (or the broker's) own, and it wraps the same sentinels.
type remoteError struct{ w wireError }

func (e *remoteError) Error() string { return e.w.Message }

// Unwrap returns the sentinels the error wrapped on the broker's side,
// and its *loop.TransitionError, *loop.HeldError and *RefusalError.
func (e *remoteError) Unwrap() []error {
	var out []error
	for _, name := range e.w.Kinds {
		for _, k := range kinds {
			if k.name == name {
				out = append(out, k.err)
			}
		}
	}
	if e.w.Transition != nil {
		out = append(out, e.w.Transition)
	}
	if e.w.Held != nil {
		out = append(out, e.w.Held)
	}
	if e.w.Refusal != nil {
		out = append(out, e.w.Refusal)
	}
	return out
}

// Temporary reports whether the error may pass if the call is made again
// (loop.TaskStore's convention).
func (e *remoteError) Temporary() bool { return e.w.Temporary }

// errTooLong: a line longer than its bound.
var errTooLong = errors.New("line too long")

// readLine reads one newline-terminated line of at most max bytes (the
// newline not counted). io.EOF: the peer closed before a line began; a
// line cut short by the end of the stream is io.ErrUnexpectedEOF.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			return nil, fmt.Errorf("%w (over %d bytes)", errTooLong, max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// writeLine writes v as one line of JSON.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
