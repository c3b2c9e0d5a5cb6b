package codex

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
)

// session decodes a stream into a Session.
func session(t *testing.T, stream string) *Session {
	t.Helper()
	s := &Session{}
	dec := newTestDecoder(strings.NewReader(stream))
	if err := decodeWith(dec, s.Add); err != nil {
		t.Fatal(err)
	}
	return s
}

const (
	lineThread   = `{"type":"thread.started","thread_id":"th-1"}` + "\n" + `{"type":"turn.started"}` + "\n"
	lineMessage  = `{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Done. <task-done>T1</task-done>"}}` + "\n"
	lineComplete = `{"type":"turn.completed","usage":{"input_tokens":2000,"cached_input_tokens":400,"output_tokens":100,"reasoning_output_tokens":20}}` + "\n"
)

func failed(msg string) string {
	return `{"type":"error","message":"` + msg + `"}` + "\n" + `{"type":"turn.failed","error":{"message":"` + msg + `"}}` + "\n"
}

func TestClassify(t *testing.T) {
	ok := lineThread + lineMessage + lineComplete
	tests := []struct {
		name       string
		stream     string
		end        agentproc.Ending
		want       loop.ErrorClass
		wantStatus int
		wantText   string
	}{
		{"success", ok, agentproc.Ending{}, loop.ClassSuccess, 0, "Done. <task-done>T1</task-done>"},
		{"success stopped after its end", ok, agentproc.Ending{ExitCode: -1, StoppedAfterResult: true}, loop.ClassSuccess, 0, "Done. <task-done>T1</task-done>"},
		{"completed turn, then a non-zero exit", ok, agentproc.Ending{ExitCode: 1}, loop.ClassAgentError, 0, "Done. <task-done>T1</task-done>"},
		{"cancel wins", ok, agentproc.Ending{ExitCode: 143, Cancelled: true}, loop.ClassCancelled, 0, "Done. <task-done>T1</task-done>"},
		{"timeout", lineThread, agentproc.Ending{ExitCode: -1, TimedOut: true}, loop.ClassTimeout, 0, ""},
		{"idle timeout", lineThread, agentproc.Ending{ExitCode: -1, IdleTimedOut: true}, loop.ClassIdleTimeout, 0, ""},
		{"no end is a crash", lineThread + lineMessage, agentproc.Ending{ExitCode: 0}, loop.ClassCrashed, 0, "Done. <task-done>T1</task-done>"},
		{"killed by a signal", lineThread, agentproc.Ending{ExitCode: -1}, loop.ClassCrashed, 0, ""},
		{"5xx", lineThread + failed("We’re currently experiencing high demand, which may cause temporary errors."), agentproc.Ending{ExitCode: 1},
			loop.ClassAPIError, 0, "We’re currently experiencing high demand, which may cause temporary errors."},
		{"429 retries exhausted", lineThread + failed("exceeded retry limit, last status: 429 Too Many Requests"), agentproc.Ending{ExitCode: 1},
			loop.ClassAPIError, 429, "exceeded retry limit, last status: 429 Too Many Requests"},
		{"idle stream", lineThread + failed("stream disconnected before completion: idle timeout waiting for SSE"), agentproc.Ending{ExitCode: 1},
			loop.ClassAPIError, 0, "stream disconnected before completion: idle timeout waiting for SSE"},
		{"401", lineThread + failed("unexpected status 401 Unauthorized: Incorrect API key provided"), agentproc.Ending{ExitCode: 1},
			loop.ClassAuth, 401, "unexpected status 401 Unauthorized: Incorrect API key provided"},
		{"403", lineThread + failed("unexpected status 403 Forbidden: nope"), agentproc.Ending{ExitCode: 1}, loop.ClassAuth, 403, "unexpected status 403 Forbidden: nope"},
		{"400 is the agent's", lineThread + failed("unexpected status 400 Bad Request: unknown parameter"), agentproc.Ending{ExitCode: 1},
			loop.ClassAgentError, 400, "unexpected status 400 Bad Request: unknown parameter"},
		{"other failure", lineThread + failed("something odd"), agentproc.Ending{ExitCode: 1}, loop.ClassAgentError, 0, "something odd"},
		{"unreachable API stopped by ralph", lineThread + `{"type":"error","message":"Reconnecting... waiting for network (error sending request)"}` + "\n",
			agentproc.Ending{ExitCode: -1, GaveUp: true}, loop.ClassAPIError, 0, "Reconnecting... waiting for network (error sending request)"},
		{"usage limit without a failed turn", lineThread + `{"type":"error","message":"You've hit your usage limit. Try again later."}` + "\n",
			agentproc.Ending{ExitCode: 1}, loop.ClassUsageLimit, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Classify(session(t, tt.stream), tt.end)
			if res.Class != tt.want || res.APIErrorStatus != tt.wantStatus || res.Text != tt.wantText {
				t.Errorf("class %s, status %d, text %q; want %s, %d, %q", res.Class, res.APIErrorStatus, res.Text, tt.want, tt.wantStatus, tt.wantText)
			}
			// As claude's: a crash is an error when its exit code says so.
			if wantErr := tt.want != loop.ClassSuccess && (tt.want != loop.ClassCrashed || tt.end.ExitCode != 0); res.IsError != wantErr {
				t.Errorf("IsError %v for class %s", res.IsError, res.Class)
			}
			if res.Agent != Name || res.SessionID != "th-1" || res.Turns != 1 {
				t.Errorf("agent %q, session %q, turns %d; want codex, th-1, 1", res.Agent, res.SessionID, res.Turns)
			}
		})
	}
}

func TestClassifyUsageLimit(t *testing.T) {
	s := session(t, lineThread+failed("You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) or try again at 7:07 AM."))
	res := Classify(s, agentproc.Ending{ExitCode: 1})
	want := &loop.UsageLimit{ResetsAt: time.Date(2026, 11, 24, 7, 7, 0, 0, time.UTC),
		Message: "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) or try again at 7:07 AM."}
	if res.Class != loop.ClassUsageLimit {
		t.Fatalf("class %s, want usage_limit", res.Class)
	}
	if diff := cmp.Diff(want, res.UsageLimit); diff != "" {
		t.Errorf("usage limit (-want +got):\n%s", diff)
	}
}

func TestUsageAndCost(t *testing.T) {
	res := Classify(session(t, lineThread+lineMessage+lineComplete), agentproc.Ending{})
	want := loop.Usage{InputTokens: 1600, CacheReadTokens: 400, OutputTokens: 100}
	if diff := cmp.Diff(want, res.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	Estimate(&res, "gpt-5.5")
	// 1600 × $5 + 400 × $0.50 + 100 × $30, per million.
	if res.CostSource != loop.CostEstimated || res.CostUSD < 0.01119999 || res.CostUSD > 0.01120001 {
		t.Errorf("cost %v (%s), want 0.0112 estimated", res.CostUSD, res.CostSource)
	}
	Estimate(&res, "gpt-6.1-sol")
	if res.CostSource != loop.CostUnknown || res.CostUSD != 0 {
		t.Errorf("cost %v (%s) for a model without a price, want 0 unknown", res.CostUSD, res.CostSource)
	}
}

func TestUnreachableCount(t *testing.T) {
	var s Session
	for _, msg := range []string{
		"Reconnecting... waiting for network (error sending request for url)",
		"Reconnecting... waiting for network (error sending request for url)",
		"Reconnecting... 1/5 (stream disconnected)",
		"Reconnecting... waiting for network (error sending request for url)",
	} {
		s.Add(loop.Event{Kind: loop.EventSystem, Subtype: SubtypeRetry, Text: msg})
		s.Add(loop.Event{Kind: loop.EventStderr, Text: "noise"})
	}
	if s.Unreachable != 3 || s.Retries != 4 {
		t.Errorf("unreachable %d, retries %d; want 3, 4", s.Unreachable, s.Retries)
	}
	s.Add(loop.Event{Kind: loop.EventText, Text: "back"})
	if s.Unreachable != 0 {
		t.Errorf("unreachable %d after the API answered, want 0", s.Unreachable)
	}
}
