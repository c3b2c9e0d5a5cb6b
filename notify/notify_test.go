package notify_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/notify"
)

var testNow = time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)

// receiver is a loopback webhook: it keeps the events posted to it and
// answers status.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	events []notify.Event
	posts  int
	status int
}

func newReceiver(t *testing.T, status int) *receiver {
	r := &receiver{status: status}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.posts++
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s with Content-Type %q", req.Method, req.Header.Get("Content-Type"))
		}
		var e notify.Event
		if err := json.Unmarshal(body, &e); err != nil {
			t.Errorf("a body that is no event: %q", body)
		}
		if r.status/100 == 2 {
			r.events = append(r.events, e)
		}
		w.WriteHeader(r.status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() ([]notify.Event, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notify.Event(nil), r.events...), r.posts
}

func options(warnings *[]string) notify.Options {
	var mu sync.Mutex
	return notify.Options{Project: "/src/app", Plan: "app", Kind: "build", Backoff: time.Millisecond, Timeout: 2 * time.Second,
		Now: func() time.Time { return testNow },
		Warn: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			*warnings = append(*warnings, strings.TrimSpace(fmt.Sprintf(format, args...)))
		}}
}

// TestEvents: the loop's notes and the run's end become events, in
// order, with their fields; the text is one line, with Slack's markup
// characters escaped.
func TestEvents(t *testing.T) {
	rcv := newReceiver(t, http.StatusOK)
	var warnings []string
	n, err := notify.New([]string{rcv.URL + "/hook"}, options(&warnings))
	if err != nil {
		t.Fatal(err)
	}
	resets := testNow.Add(time.Hour)
	n.Observe(loop.Note{Kind: loop.NoteReceipt, Receipt: &loop.Receipt{CostUSD: 0.25}})
	n.Observe(loop.Note{Kind: loop.NoteIterationEnd, Status: loop.IterDone, Task: loop.Task{ID: "t-0", Title: "ok"}})
	n.Observe(loop.Note{Kind: loop.NoteIterationEnd, Status: loop.IterTaskFailed, Task: loop.Task{ID: "t-1", Title: "Ping <!channel> & co"}, Message: "cannot"})
	n.Observe(loop.Note{Kind: loop.NoteWait, Until: resets})
	n.RunEnd(notify.End{Outcome: loop.OutcomeBlocked, ExitCode: 6, Message: "blocked: 1 task remains but none is ready; failed: t-1",
		Done: 2, Failed: 1, Remaining: 1, CostUSD: 0.5})
	if err := n.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	six := 6
	base := notify.Event{Project: "/src/app", Plan: "app", Kind: "build", At: testNow}
	with := func(e notify.Event) notify.Event {
		e.Project, e.Plan, e.Kind, e.At = base.Project, base.Plan, base.Kind, base.At
		return e
	}
	want := []notify.Event{
		with(notify.Event{Event: "task_failed", Text: "ralph: task t-1 failed: Ping &lt;!channel&gt; &amp; co", CostUSD: 0.25,
			Task: &notify.Task{ID: "t-1", Title: "Ping <!channel> & co", Reason: "cannot"}}),
		with(notify.Event{Event: "usage_limit_wait", Text: "ralph: usage limit reached; waiting until 2026-11-28T08:00:00Z", CostUSD: 0.25, ResetsAt: &resets}),
		with(notify.Event{Event: "blocked", Text: "ralph: blocked: blocked: 1 task remains but none is ready; failed: t-1", Outcome: "blocked",
			Done: 2, Failed: 1, Remaining: 1, CostUSD: 0.25}),
		with(notify.Event{Event: "run_end", Outcome: "blocked", ExitCode: &six, Done: 2, Failed: 1, Remaining: 1, CostUSD: 0.5,
			Text: "ralph build in /src/app ended: blocked (exit 6) · 2 done, 1 failed, 1 remain · $0.50"}),
	}
	got, _ := rcv.got()
	if diff := cmp.Diff(want, got, cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
}

// TestFailingTargets: a target that answers 500 is tried three times, a
// dead one (a closed port) as often, each said once in a warning with its
// secrets masked; a good target beside them gets every event; Close is
// bounded.
func TestFailingTargets(t *testing.T) {
	good, bad := newReceiver(t, http.StatusOK), newReceiver(t, http.StatusInternalServerError)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://user:hunter2@" + ln.Addr().String() + "/services/T1/B2/s3cret?token=abc"
	ln.Close()
	var warnings []string
	n, err := notify.New([]string{bad.URL, dead, good.URL}, options(&warnings))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n.RunEnd(notify.End{Outcome: loop.OutcomeComplete})
	if err := n.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v", took)
	}
	if events, _ := good.got(); len(events) != 1 || events[0].Event != "run_end" {
		t.Errorf("the good target got %+v", events)
	}
	if _, posts := bad.got(); posts != 3 {
		t.Errorf("the failing target was tried %d times, want 3", posts)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "500 Internal Server Error") ||
		!strings.Contains(warnings[1], "http://user:***@"+ln.Addr().String()+"/services/***/***/***?token=***") {
		t.Errorf("warnings: %q", warnings)
	}
	for _, w := range warnings {
		for _, secret := range []string{"hunter2", "s3cret", "abc", "B2"} {
			if strings.Contains(w, secret) {
				t.Errorf("a warning shows %q: %s", secret, w)
			}
		}
	}
}

// TestCommandTarget: any other target is a shell command that gets the
// same JSON on its standard input; one that hangs is killed at the
// timeout and said.
func TestCommandTarget(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "event.json")
	var warnings []string
	opts := options(&warnings)
	opts.Timeout, opts.Tries = 500*time.Millisecond, 1
	n, err := notify.New([]string{"cat > " + out, "sleep 30"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n.RunEnd(notify.End{Outcome: loop.OutcomeComplete, Done: 3})
	if err := n.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a hanging command held Close for %v", took)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var e notify.Event
	if err := json.Unmarshal(b, &e); err != nil || e.Event != "run_end" || e.Done != 3 || e.ExitCode == nil || *e.ExitCode != 0 {
		t.Errorf("the command got %s (%v)", b, err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `command "sleep 30"`) || !strings.Contains(warnings[0], "timed out") {
		t.Errorf("warnings: %q", warnings)
	}
}

func TestBadTargets(t *testing.T) {
	for _, target := range []string{"ftp://example.com/x", "http://"} {
		if _, err := notify.New([]string{target}, notify.Options{}); err == nil {
			t.Errorf("New(%q) took it", target)
		}
	}
	n, err := notify.New([]string{" ", ""}, notify.Options{})
	if n != nil || err != nil {
		t.Errorf("New of no target = %v, %v; want nil, nil", n, err)
	}
	n.Observe(loop.Note{Kind: loop.NoteWait}) // a nil Notifier does nothing
	n.RunEnd(notify.End{})
	if err := n.Close(t.Context()); err != nil {
		t.Error(err)
	}
}

func TestMask(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.slack.com/services/T000/B000/XXXX": "https://hooks.slack.com/services/***/***/***",
		"https://example.com/hook?token=abc&x=1":          "https://example.com/hook?token=***&x=***",
		"http://me:pw@127.0.0.1:8080/notify":              "http://me:***@127.0.0.1:8080/notify",
		"http://me@host/a":                                "http://me@host/a",
		"notify-send ralph":                               "notify-send ralph",
	} {
		if got := notify.Mask(in); got != want {
			t.Errorf("Mask(%q) = %q, want %q", in, got, want)
		}
	}
}
