package serve

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

//go:embed assets
var assetFS embed.FS

// Store is what the view reads of a plan; *dag.Store opened with
// Options.ReadOnly satisfies it.
type Store interface {
	EachTask(ctx context.Context, p dag.ListParams, fn func(loop.Task) error) error
	Get(ctx context.Context, id string) (loop.Task, error)
	Logs(ctx context.Context, id string) ([]loop.LogEntry, error)
	Receipts(ctx context.Context, limit int) ([]loop.Receipt, error)
}

// Config configures a Server.
type Config struct {
	// Store is the plan, opened read-only.
	Store Store
	// DBPath is the plan's SQLite file, watched (with its write-ahead log)
	// to learn of changes. Empty for a plan on a server: then a Store that
	// is a loop.ChangeWatcher is asked instead (PostgreSQL notifications).
	DBPath string
	// LogDir is <project>/.ralph/logs: the session logs, event logs and
	// raw streams.
	LogDir string
	// Root is the project root: LogDir is reached from it without
	// following a link (package safefile), so that a .ralph or
	// .ralph/logs replaced by a link is refused. Empty: LogDir itself is
	// trusted, and only what lies below it is checked.
	Root string
	// Token, when set, is required on every request.
	Token string
	// Hosts, when set, are the only Host header values accepted
	// (host:port, compared without case): anything else is refused, which
	// defeats DNS rebinding. ListenAndServe sets them for a loopback
	// address: the loopback names and the address itself, with its port.
	Hosts []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Server serves the view. It is an http.Handler.
type Server struct {
	cfg    Config
	mux    *http.ServeMux
	hub    *hub
	assets fs.FS
	runs   runs
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("serve: no store")
	}
	if cfg.LogDir == "" {
		return nil, errors.New("serve: no log directory")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	sub, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, assets: sub}
	s.hub = newHub(s)
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", s.index)
	mux.Handle("/assets/", http.StripPrefix("/assets/", http.HandlerFunc(s.asset)))
	mux.HandleFunc("/api/plan", s.apiPlan)
	mux.HandleFunc("/api/task/{id}", s.apiTask)
	mux.HandleFunc("/api/receipts", s.apiReceipts)
	mux.HandleFunc("/api/run", s.apiRun)
	mux.HandleFunc("/api/events", s.apiEvents)
	mux.HandleFunc("/api/runs", s.apiRuns)
	s.mux = mux
	return s, nil
}

// ServeHTTP checks the request (method, Host, token), sets the security
// headers and serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "ralph serve: only GET is served (the view changes nothing)", http.StatusMethodNotAllowed)
		return
	}
	if !s.hostAllowed(r.Host) {
		http.Error(w, "ralph serve: unexpected Host header; open the address ralph serve printed", http.StatusMisdirectedRequest)
		return
	}
	if !s.authorize(w, r) {
		return
	}
	if strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/api/events" {
		// A plan on a server that does not answer is said within a
		// second, not after the store's retries.
		if err := s.reachable(r.Context()); err != nil {
			s.storeError(w, err)
			return
		}
	}
	if strings.HasPrefix(r.URL.Path, "/logs/") {
		// Not through the mux, which would answer a path with dot
		// segments with a redirect: /logs/ checks every path itself.
		s.logs(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close stops the watcher and ends the event streams.
func (s *Server) Close() error {
	s.hub.close()
	return nil
}

// CheckAddr returns the error ListenAndServe returns for addr and token
// before it listens: an address it cannot read, or one off loopback
// without a token. Callers check first, to refuse before they do anything
// else.
func CheckAddr(addr, token string) error {
	loopback, err := IsLoopback(addr)
	if err != nil {
		return err
	}
	if !loopback && token == "" {
		return fmt.Errorf("serve: %s is not a loopback address: give a token (--token or $RALPH_SERVE_TOKEN) so that only you can see the plan", addr)
	}
	return nil
}

// ListenAndServe serves the view on addr until ctx is done, then shuts
// down gracefully. ready, if not nil, is called with the URL to open once
// the listener is bound. It refuses an address that is not loopback
// without a token.
func ListenAndServe(ctx context.Context, addr string, cfg Config, ready func(url string)) error {
	if err := CheckAddr(addr, cfg.Token); err != nil {
		return err
	}
	loopback, _ := IsLoopback(addr)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: cannot listen on %s: %w", addr, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if loopback {
		h, _, _ := net.SplitHostPort(addr)
		cfg.Hosts = append(loopbackHosts(port), net.JoinHostPort(h, fmt.Sprint(port)))
	}
	srv, err := New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	defer srv.Close()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	host, _, _ := net.SplitHostPort(addr)
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, fmt.Sprint(port)) + "/"
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(url)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	srv.Close() // ends the event streams, which Shutdown would wait for
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	return nil
}

// IsLoopback reports whether addr (host:port) listens on loopback only:
// a loopback IP, or "localhost". An empty host, 0.0.0.0, ::, another
// address or another name is not.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("serve: address %q: %w (want host:port, like 127.0.0.1:7420)", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback(), nil
}

func loopbackHosts(port int) []string {
	p := fmt.Sprint(port)
	return []string{"127.0.0.1:" + p, "localhost:" + p, "[::1]:" + p}
}

// hostAllowed checks the Host header against cfg.Hosts, when set.
func (s *Server) hostAllowed(host string) bool {
	if len(s.cfg.Hosts) == 0 {
		return true
	}
	for _, h := range s.cfg.Hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}
