package agentproctest

import (
	"net/http"
	"sync"
	"testing"
)

// Fake is what each scripted fake model API of the agent test packages
// (claudetest, codextest, geminitest, opencodetest) keeps, whatever its
// protocol: the script that answers, the requests received, and replies
// held open. An API embeds it and serves HTTP in its own protocol.
type Fake[Req, Rep any] struct {
	// Stalled is closed when a reply first stalls (Stall).
	Stalled <-chan struct{}

	script   func(Req) Rep
	mu       sync.Mutex
	requests []Req
	stalled  chan struct{}
	stallOne sync.Once
	done     chan struct{} // closed at the end of the test: stalls give up
}

// NewFake returns a Fake that answers with script.
func NewFake[Req, Rep any](script func(Req) Rep) *Fake[Req, Rep] {
	f := &Fake[Req, Rep]{script: script, stalled: make(chan struct{}), done: make(chan struct{})}
	f.Stalled = f.stalled
	return f
}

// Serve serves api, the API that embeds f, on 127.0.0.1 until the end of
// the test and returns its address (host:port); at the end, stalled
// replies give up first.
func (f *Fake[Req, Rep]) Serve(t testing.TB, api http.Handler) string {
	t.Helper()
	return Serve(t, api, f.done)
}

// Record keeps req and returns how many requests were received, req
// included.
func (f *Fake[Req, Rep]) Record(req Req) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	return len(f.requests)
}

// Answer is the script's reply to req.
func (f *Fake[Req, Rep]) Answer(req Req) Rep { return f.script(req) }

// Requests returns the requests received so far, in order.
func (f *Fake[Req, Rep]) Requests() []Req {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Req(nil), f.requests...)
}

// Stall holds the response to r open, sending nothing more, until the
// client goes away or the test ends; the first stall closes Stalled.
func (f *Fake[Req, Rep]) Stall(r *http.Request) {
	f.stallOne.Do(func() { close(f.stalled) })
	select {
	case <-r.Context().Done():
	case <-f.done:
	}
}
