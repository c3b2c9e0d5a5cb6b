package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/ralph-dev/ralph/loop"
)

// TestWireHeldError: a *loop.HeldError crosses the socket whole — its
// message, its sentinel and its fields — so that the agent's side can
// word it as the broker's side would.
func TestWireHeldError(t *testing.T) {
	held := &loop.HeldError{TaskID: "t-1", ClaimedBy: "agent-a", Holder: loop.Holder{Host: "h", PID: 7, Start: 9}, Move: loop.MoveFail}
	sent := fmt.Errorf("progress: %w", held)
	line, err := json.Marshal(frame{Err: encodeError(sent)})
	if err != nil {
		t.Fatal(err)
	}
	var f frame
	if err := json.Unmarshal(line, &f); err != nil {
		t.Fatal(err)
	}
	got := error(&remoteError{w: *f.Err})
	if got.Error() != sent.Error() {
		t.Errorf("message %q, want %q", got, sent)
	}
	if !errors.Is(got, loop.ErrHeldByLiveAgent) {
		t.Errorf("%v: errors.Is(loop.ErrHeldByLiveAgent) is false", got)
	}
	var back *loop.HeldError
	if !errors.As(got, &back) || *back != *held {
		t.Errorf("errors.As gives %+v, want %+v", back, held)
	}
	// Another error carries none.
	if f := encodeError(loop.ErrNotFound); f.Held != nil {
		t.Errorf("%v crossed with a HeldError %+v", loop.ErrNotFound, f.Held)
	}
}
