package serve_test

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// sleeper starts a process that lives until killed and returns its Holder
// and the kill (which also reaps it: a zombie still has its /proc entry).
func sleeper(t *testing.T) (loop.Holder, func()) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill := func() {
		if !killed {
			killed = true
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(kill)
	start, err := loop.ProcessStart(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return loop.Holder{Host: loop.HostID(), PID: cmd.Process.Pid, Start: start}, kill
}

// A build killed mid-task writes nothing more: its claim's holder and the
// process its event log names die without a word to the plan or the logs.
// The page learns it anyway (the watcher looks at live holders every few
// seconds, at /proc, not at the store): the claim shows as stale, and the
// killed build's workers leave the run view.
func TestKilledBuildShown(t *testing.T) {
	f := newFixture(t)
	build, kill := sleeper(t)
	if _, err := f.store.Claim(t.Context(), loop.ClaimParams{TaskID: "docs", Agent: "ralph-k-w3", Lease: time.Hour, Holder: build}); err != nil {
		t.Fatal(err)
	}
	f.events.Holder = build
	f.events.Observe(loop.Note{Kind: loop.NoteIterationStart, At: time.Now(), Session: session, Worker: "w3", Iteration: 3,
		Task: loop.Task{ID: "docs", Title: "Docs"}, Model: "sonnet"})
	_, hs := f.server(t, nil)

	type view struct {
		Tasks []struct{ ID, Status, Stale string }
	}
	stale := func() map[string]string {
		var p view
		getJSON(t, hs.URL+"/api/plan", &p)
		out := map[string]string{}
		for _, task := range p.Tasks {
			if task.Status == "in_progress" {
				out[task.ID] = task.Stale
			}
		}
		return out
	}
	type runView struct {
		Workers []struct{ Worker, Stale string }
	}
	workers := func() map[string]string {
		var r runView
		getJSON(t, hs.URL+"/api/run", &r)
		out := map[string]string{}
		for _, w := range r.Workers {
			out[w.Worker] = w.Stale
		}
		return out
	}
	if got, want := stale(), map[string]string{"api": "", "docs": ""}; !equal(got, want) {
		t.Fatalf("before: stale %v, want %v", got, want)
	}
	if got := workers(); len(got) != 3 || got["w3"] != "" {
		t.Fatalf("before: workers %v, want w1, w2 and w3 of the running build", got)
	}
	ch := sse(t, hs.URL+"/api/events")

	// Give the watcher time to start looking (a holder already dead when
	// it starts is found at once): the death must be seen by the look.
	time.Sleep(time.Second)
	kill()
	_, took := waitEvent(t, ch, "plan")
	t.Logf("holder killed → plan event: %v (the look is every 5 s)", took)
	if got, want := stale(), map[string]string{"api": "", "docs": "holder gone"}; !equal(got, want) {
		t.Errorf("after: stale %v, want %v", got, want)
	}
	ended := map[string]bool{}
	for len(ended) < 3 {
		data, _ := waitEvent(t, ch, "run")
		var w struct {
			Worker string
			Ended  bool
		}
		if err := json.Unmarshal([]byte(data), &w); err != nil {
			t.Fatal(err)
		}
		if !w.Ended {
			t.Fatalf("run event %s, want the killed build's workers ended", data)
		}
		ended[w.Worker] = true
	}
	// What is left is what the store says: the two claims, one of them
	// stale.
	if got, want := workers(), map[string]string{"ralph-abc-w1": "", "ralph-k-w3": "holder gone"}; !equal(got, want) {
		t.Errorf("after: workers %v, want %v", got, want)
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A claim whose lease runs out (its holder on another machine, or none)
// turns stale on the page when it does, with no write to the plan: the
// watcher waits for the earliest lease with one timer.
func TestLeaseExpiryShown(t *testing.T) {
	f := newFixture(t)
	if _, err := f.store.Claim(t.Context(), loop.ClaimParams{TaskID: "docs", Agent: "user-bob", Lease: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	_, hs := f.server(t, nil)
	ch := sse(t, hs.URL+"/api/events")
	_, took := waitEvent(t, ch, "plan")
	t.Logf("claim of 1.5 s → plan event %v after the stream opened", took)
	var p struct {
		Tasks []struct{ ID, Status, Stale string }
	}
	getJSON(t, hs.URL+"/api/plan", &p)
	for _, task := range p.Tasks {
		if task.ID == "docs" && (task.Status != "in_progress" || task.Stale != "lease expired") {
			t.Errorf("docs: %s, stale %q; want in_progress with its lease expired", task.Status, task.Stale)
		}
	}
}
