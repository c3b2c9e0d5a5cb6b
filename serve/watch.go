package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// Watching: nothing watches while no event stream is open. The first
// stream starts one watcher, the last one to close stops it. The watcher
// learns of changes from the platform (inotify on Linux: the database's
// directory, the log directory and the newest sessions' directories; a
// 1 s look at the files elsewhere) and, for a plan on a server, from the
// store's notifications. Changes are coalesced for coalesce before the
// plan is read again; a `plan` event goes out only when the plan's
// version changed.
const (
	coalesce  = 100 * time.Millisecond
	keepAlive = 25 * time.Second
	// clientBuffer is how many events wait for a slow client; one that
	// falls further behind is dropped (its browser reconnects and reads
	// everything again).
	clientBuffer = 64
)

type sseEvent struct {
	name string
	data []byte
}

type client struct {
	ch chan sseEvent
}

// change is what a watcher saw: the database, or a session's event log.
type change struct {
	db      bool
	session string
}

type hub struct {
	s       *Server
	mu      sync.Mutex
	clients map[*client]bool
	cancel  context.CancelFunc
	done    chan struct{}
	closed  bool
	// What was last sent, to send only real changes.
	version string
	receipt string
	workers map[string]string
}

func newHub(s *Server) *hub {
	return &hub{s: s, clients: map[*client]bool{}}
}

// subscribe adds a client, starting the watcher for the first one.
func (h *hub) subscribe() (*client, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	c := &client{ch: make(chan sseEvent, clientBuffer)}
	h.clients[c] = true
	if h.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan struct{})
		// What the clients have now is what the page fetches after it
		// connects: start from the current state.
		h.version, h.receipt = h.s.planVersion(ctx), h.s.latestReceipt(ctx)
		h.workers = map[string]string{}
		go h.watch(ctx, h.done)
	}
	return c, true
}

// unsubscribe removes a client, stopping the watcher after the last one.
func (h *hub) unsubscribe(c *client) {
	h.mu.Lock()
	delete(h.clients, c) // broadcast may have dropped it already
	var done chan struct{}
	if len(h.clients) == 0 && h.cancel != nil {
		h.cancel()
		done = h.done
		h.cancel, h.done = nil, nil
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

// close ends every stream and the watcher; no stream opens after it.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for c := range h.clients {
		close(c.ch)
		delete(h.clients, c)
	}
	var done chan struct{}
	if h.cancel != nil {
		h.cancel()
		done = h.done
		h.cancel, h.done = nil, nil
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

// broadcast sends an event to every client, dropping those that fell
// behind.
func (h *hub) broadcast(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		select {
		case c.ch <- sseEvent{name: name, data: data}:
		default:
			close(c.ch)
			delete(h.clients, c)
		}
	}
}

// watch runs the watcher until ctx is done, then closes done.
func (h *hub) watch(ctx context.Context, done chan struct{}) {
	defer close(done)
	changes := make(chan change, 256)
	var wg sync.WaitGroup
	defer wg.Wait()
	// Every watcher takes its first look (inotify's watches added, a
	// store's first token) before the plan is read below: a change after
	// that read is one they see.
	var armed sync.WaitGroup
	start := func(w func(ready func())) {
		armed.Add(1)
		var once sync.Once
		ready := func() { once.Do(armed.Done) }
		wg.Go(func() { w(ready); ready() })
	}
	start(func(ready func()) { watchFiles(ctx, h.s.cfg.DBPath, h.s.base(), h.s.cfg.LogDir, changes, ready) })
	if cw := storeWatcher(h.s.cfg.Store); cw != nil && h.s.cfg.DBPath == "" {
		start(func(ready func()) { watchStore(ctx, cw, changes, ready) })
	}
	armed.Wait()
	var timer *time.Timer
	var fire <-chan time.Time
	db := false
	sessions := map[string]bool{}
	look := &lookout{s: h.s}
	look.rearm(ctx)
	defer look.stop()
	// What changed between the snapshot subscribe took and the watchers'
	// first look (a write, a holder that died) goes out now.
	h.processGone(ctx)
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-look.C:
			if anyGone(look.now.procs) {
				h.processGone(ctx)
				look.rearm(ctx)
			}
		case <-look.LeaseC:
			h.planChanged(ctx) // a claim went stale
			look.rearm(ctx)
		case c := <-changes:
			if c.db {
				db = true
			}
			if c.session != "" {
				sessions[c.session] = true
			}
			if fire == nil {
				timer = time.NewTimer(coalesce)
				fire = timer.C
			}
		case <-fire:
			fire, timer = nil, nil
			if db {
				h.planChanged(ctx)
				db = false
			}
			for name := range sessions {
				h.sessionChanged(name)
				delete(sessions, name)
			}
			look.rearm(ctx)
		}
	}
}

// processGone tells the page that a process holding a claim or running a
// build died: the plan (its claims are stale now) and the cards of a
// killed build's workers.
func (h *hub) processGone(ctx context.Context) {
	h.planChanged(ctx)
	for _, w := range h.s.deadSessions() {
		h.broadcast("run", w)
	}
}

// planChanged sends `plan` when the plan's version changed, and
// `receipts` when a receipt was added.
func (h *hub) planChanged(ctx context.Context) {
	v := h.s.planVersion(ctx)
	rc := h.s.latestReceipt(ctx)
	h.mu.Lock()
	newPlan := v != "" && v != h.version
	newReceipt := rc != h.receipt
	h.version, h.receipt = v, rc
	h.mu.Unlock()
	if newPlan {
		h.broadcast("plan", map[string]string{"version": v})
	}
	if newReceipt {
		h.broadcast("receipts", map[string]string{})
	}
}

// sessionChanged sends a `run` event for each worker of the session whose
// state changed.
func (h *hub) sessionChanged(name string) {
	_, workers, err := h.s.refresh(name)
	if err != nil {
		return
	}
	for _, w := range workers {
		data, _ := json.Marshal(w)
		key := w.Session + "/" + w.Worker
		h.mu.Lock()
		same := h.workers[key] == string(data)
		h.workers[key] = string(data)
		h.mu.Unlock()
		if !same {
			h.broadcast("run", w)
		}
	}
}

// planVersion is the plan's version now, "" when it cannot be read.
func (s *Server) planVersion(ctx context.Context) string {
	p, err := s.readPlan(ctx)
	if err != nil {
		return ""
	}
	return p.Version
}

// latestReceipt names the newest receipt.
func (s *Server) latestReceipt(ctx context.Context) string {
	rs, err := s.cfg.Store.Receipts(ctx, 1)
	if err != nil || len(rs) == 0 {
		return ""
	}
	r := rs[0]
	return fmt.Sprintf("%s/%d/%s/%s/%d", r.Session, r.Iteration, r.Mode, r.Worker, r.StartedAt.UnixNano())
}

// viewWatcher is a store on a server that can also tell a viewer of
// claims (dag.Store.ViewChanges).
type viewWatcher interface {
	ViewChanges() loop.ChangeWatcher
}

// storeWatcher is what tells the viewer of a plan on a server of its
// changes: the store's ViewChanges, which hears claims too, or else its
// ChangeWatcher; nil for a store that is neither.
func storeWatcher(store any) loop.ChangeWatcher {
	if vw, ok := store.(viewWatcher); ok {
		if cw := vw.ViewChanges(); cw != nil {
			return cw
		}
	}
	cw, _ := store.(loop.ChangeWatcher)
	return cw
}

// watchStore asks a server store for its changes; ready is called once it
// tried for its first token.
func watchStore(ctx context.Context, cw loop.ChangeWatcher, changes chan<- change, ready func()) {
	for ctx.Err() == nil {
		token, err := cw.ChangeToken(ctx)
		ready()
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		changed, err := cw.WaitChange(ctx, token, time.Minute)
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		if changed {
			send(ctx, changes, change{db: true})
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func send(ctx context.Context, changes chan<- change, c change) {
	select {
	case changes <- c:
	case <-ctx.Done():
	}
}

// apiEvents is the event stream.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "ralph serve: streaming unsupported", http.StatusInternalServerError)
		return
	}
	c, ok := s.hub.subscribe()
	if !ok {
		http.Error(w, "ralph serve: shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.hub.unsubscribe(c)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n: connected\n\n")
	fl.Flush()
	keep := time.NewTicker(keepAlive)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-c.ch:
			if !ok {
				return
			}
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
			fl.Flush()
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		}
	}
}
