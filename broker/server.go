package broker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// EnvSocket names the variable that holds the socket's path in the
// agent's environment.
const EnvSocket = "RALPH_SOCKET"

// Bounds of the protocol.
const (
	// MaxRequest is the most bytes one request line may hold; a longer
	// one is refused and its connection closed.
	MaxRequest = 1 << 20
	// MaxFrame is the most bytes one response line may hold: the client
	// refuses a longer one (a task's description would have to pass 64
	// MB).
	MaxFrame = 64 << 20
	// MaxConns is how many connections a server serves at once; a
	// connection past them gets a refusal and is closed.
	MaxConns = 32
	// IdleTimeout is how long a connection may wait between requests.
	IdleTimeout = time.Minute
	// WriteTimeout bounds the write of one response line to a client
	// that does not read.
	WriteTimeout = 30 * time.Second
)

// maxSocketPath is the longest socket path Listen makes: sun_path holds
// 108 bytes on Linux, 104 on macOS and the BSDs, the terminating NUL
// included.
const maxSocketPath = 100

// Errors of the broker.
var (
	// ErrRefused: the broker does not serve the command to this agent:
	// a move as a person or as another agent, a forced one, a write of a
	// read-only (verifier's) session, a claim outside peek mode, or a
	// connection from a process outside the agent's sandbox. The message
	// says which; a forced move and a claim outside peek mode are a
	// *RefusalError.
	ErrRefused = errors.New("broker: refused")
	// ErrUnsupported: the plan's store lacks what the command needs (a
	// store that is not a loop.TaskAdder cannot take `task add`).
	ErrUnsupported = errors.New("broker: not supported by this plan's store")
	// ErrUnreachable: no broker answers at the socket's path (Dial).
	ErrUnreachable = errors.New("broker: no broker answers")
)

// Refusal names a refusal whose reason is a field a caller sets, so that
// it may word it for its users (cmd/ralph names its flags).
type Refusal string

// The refusals a *RefusalError names.
const (
	// RefusedForce: a move with loop.Actor.Force, which is a person's and
	// never an agent's.
	RefusedForce Refusal = "force"
	// RefusedClaim: a claim in a session whose loop claims the tasks
	// (loop.PlanAccess.ClaimMode is not loop.ClaimAgent, peek mode).
	RefusedClaim Refusal = "claim"
)

// RefusalError is an ErrRefused error whose reason is a field of the
// request or of the session, with the session's agent. It crosses the
// socket whole: the client's errors.As finds it as the broker made it.
type RefusalError struct {
	Refusal Refusal
	Agent   string // the session's agent
}

func (e *RefusalError) Error() string {
	switch e.Refusal {
	case RefusedForce:
		return fmt.Sprintf("%v: Actor.Force is for people; agent %s moves only the tasks it holds", ErrRefused, e.Agent)
	case RefusedClaim:
		return fmt.Sprintf("%v: in this run the ralph loop claims the tasks; an agent claims for itself in peek mode only (ClaimMode %s)", ErrRefused, loop.ClaimAgent)
	}
	return fmt.Sprintf("%v: %s", ErrRefused, e.Refusal)
}

// Unwrap returns ErrRefused.
func (e *RefusalError) Unwrap() error { return ErrRefused }

// Server serves one agent session's plan on a Unix socket of its own.
// Make it with Listen, tell it the agent's process with Admit once the
// agent has started, run Serve, and Close it when the session ends.
type Server struct {
	plan loop.PlanAccess
	ln   *net.UnixListener
	dir  string // the socket's own directory, removed by Close
	path string

	mu       sync.Mutex
	root     *process      // Admit's: the connecting process must descend from it
	admitted chan struct{} // closed by the first Admit
	conns    map[net.Conn]struct{}
	closed   bool
	cancel   context.CancelFunc // Serve's: ends the requests in flight
	wg       sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Listen makes a new directory of its own (mode 0700) in dir — "" means
// the temp directory, or /tmp when the temp directory's path would make
// the socket's too long for sun_path — and listens on a socket in it for
// plan's agent. plan.Store and plan.Agent are required.
func Listen(dir string, plan loop.PlanAccess) (*Server, error) {
	if plan.Store == nil || plan.Agent == "" {
		return nil, errors.New("broker: a PlanAccess needs a Store and an Agent")
	}
	if dir == "" {
		dir = os.TempDir()
		// "/ralph-broker-" and ten random digits, "/s".
		if len(dir)+len("/ralph-broker-0123456789/s") > maxSocketPath {
			dir = "/tmp"
		}
	}
	sockDir, err := os.MkdirTemp(dir, "ralph-broker-")
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	// MkdirTemp makes it 0700; said again in case a umask or an
	// implementation ever differs.
	if err := os.Chmod(sockDir, 0o700); err != nil {
		os.RemoveAll(sockDir)
		return nil, fmt.Errorf("broker: %w", err)
	}
	path := filepath.Join(sockDir, "s")
	if len(path) > maxSocketPath {
		os.RemoveAll(sockDir)
		return nil, fmt.Errorf("broker: socket path %s is longer than %d bytes", path, maxSocketPath)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		os.RemoveAll(sockDir)
		return nil, fmt.Errorf("broker: %w", err)
	}
	// Close removes the directory, and with it the socket.
	ln.SetUnlinkOnClose(false)
	return &Server{plan: plan, ln: ln, dir: sockDir, path: path, conns: map[net.Conn]struct{}{}, admitted: make(chan struct{})}, nil
}

// Path is the socket's path: the value of RALPH_SOCKET.
func (s *Server) Path() string { return s.path }

// Dir is the socket's own directory.
func (s *Server) Dir() string { return s.dir }

// Admit names the agent's process: a connection is served only when the
// process that made it is pid or descends from it (see the package
// documentation, "Who may connect"). A connection made before Admit waits
// for it up to AdmitWait, and is refused after. Admit fails when pid's
// start time cannot be read (the process is gone).
func (s *Server) Admit(pid int) error {
	p, err := admit(pid)
	if err != nil {
		return fmt.Errorf("broker: admit process %d: %w", pid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root == nil {
		close(s.admitted)
	}
	s.root = p
	return nil
}

// AdmitWait is how long a connection made before Admit waits for it: the
// agent's process may connect before its starter has had time to admit
// it.
const AdmitWait = 10 * time.Second

// Serve accepts connections until ctx is cancelled or Close is called,
// then closes the connections still open, waits for their requests to
// end and returns nil; its error is otherwise the listener's. Each
// connection is served on a goroutine of its own, its requests one after
// the other, each with a context that ends with ctx.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.shut() })
	defer stop()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || ctx.Err() != nil {
				s.shut()
				s.wg.Wait()
				return nil
			}
			s.shut()
			s.wg.Wait()
			return fmt.Errorf("broker: accept: %w", err)
		}
		if !s.track(c) {
			c.Close()
			continue
		}
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			s.serveConn(ctx, c)
		}()
	}
}

// track records an accepted connection (and counts it in wg), unless the
// server is closing; one past MaxConns gets a refusal first.
func (s *Server) track(c *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if len(s.conns) >= MaxConns {
		c.SetWriteDeadline(time.Now().Add(time.Second))
		writeLine(c, frame{Err: encodeError(fmt.Errorf("%w: the broker serves %d connections at once", ErrRefused, MaxConns))})
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// shut stops accepting and closes every open connection.
func (s *Server) shut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.ln.Close()
	}
	if s.cancel != nil {
		s.cancel()
	}
	for c := range s.conns {
		c.Close()
	}
}

// Close stops the server (Serve returns), closes its connections,
// cancels their requests in flight and waits for them to end, and removes
// the socket and its directory.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.shut()
		s.wg.Wait()
		s.closeErr = os.RemoveAll(s.dir)
	})
	return s.closeErr
}

// serveConn serves one connection: the peer check, then requests until
// the client closes, idles past IdleTimeout or sends something that is
// not a request.
func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	w := &frameWriter{c: c}
	t := time.NewTimer(AdmitWait)
	select {
	case <-s.admitted:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	s.mu.Lock()
	root := s.root
	s.mu.Unlock()
	if err := checkPeer(c, root); err != nil {
		w.send(frame{Err: encodeError(fmt.Errorf("%w: %v", ErrRefused, err))})
		return
	}
	r := bufio.NewReaderSize(c, 64<<10)
	for ctx.Err() == nil {
		c.SetReadDeadline(time.Now().Add(IdleTimeout))
		line, err := readLine(r, MaxRequest)
		if err != nil {
			if errors.Is(err, errTooLong) {
				w.send(frame{Err: encodeError(fmt.Errorf("%w: request %v", ErrRefused, err))})
			}
			return
		}
		c.SetReadDeadline(time.Time{})
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			w.send(frame{Err: encodeError(fmt.Errorf("%w: not a request: %v", ErrRefused, err))})
			return
		}
		if err := s.handle(ctx, req, w); err != nil {
			return // the client is gone, or stopped reading
		}
	}
}

// frameWriter writes response lines, each within WriteTimeout.
type frameWriter struct {
	c   *net.UnixConn
	err error
}

func (w *frameWriter) send(f frame) error {
	if w.err != nil {
		return w.err
	}
	w.c.SetWriteDeadline(time.Now().Add(WriteTimeout))
	w.err = writeLine(w.c, f)
	return w.err
}

// handle answers one request. Its error is the connection's (a write that
// failed); the plan's errors go to the client.
func (s *Server) handle(ctx context.Context, req request, w *frameWriter) error {
	f, err := s.apply(ctx, req, w)
	if err != nil {
		return w.send(frame{Err: encodeError(err)})
	}
	if w.err != nil {
		return w.err
	}
	f.End = true
	return w.send(f)
}

// apply runs req against the plan as the session's agent and returns the
// final frame's content (list sends its tasks through w as it reads them).
func (s *Server) apply(ctx context.Context, req request, w *frameWriter) (frame, error) {
	p := s.plan
	if writes[req.Op] && p.ReadOnly {
		return frame{}, fmt.Errorf("%w: the verifier's session only reads the plan", ErrRefused)
	}
	st := p.Store
	switch req.Op {
	case opGet:
		t, err := st.Get(ctx, req.ID)
		return frame{Task: &t}, err
	case opLogs:
		logs, err := st.Logs(ctx, req.ID)
		return frame{Logs: logs}, err
	case opReady:
		ts, err := st.Ready(ctx, req.Scope, req.Limit)
		return frame{Tasks: ts}, err
	case opActive:
		ts, err := st.Active(ctx, req.Scope)
		return frame{Tasks: ts}, err
	case opCounts:
		c, err := st.Counts(ctx, req.Scope)
		return frame{Counts: &c}, err
	case opList:
		return frame{}, s.list(ctx, req.List, w)
	case opClaim:
		cp, err := s.claimParams(req.Claim)
		if err != nil {
			return frame{}, err
		}
		t, err := st.Claim(ctx, cp)
		return frame{Task: &t}, err
	case opComplete, opFail:
		mp, err := s.move(req.Move)
		if err != nil {
			return frame{}, err
		}
		if req.Op == opComplete {
			return frame{}, st.Complete(ctx, mp)
		}
		return frame{}, st.Fail(ctx, mp)
	case opNote:
		mp, err := s.move(req.Move)
		if err != nil {
			return frame{}, err
		}
		n, ok := st.(loop.TaskNoter)
		if !ok {
			return frame{}, fmt.Errorf("%w: notes", ErrUnsupported)
		}
		return frame{}, n.Note(ctx, mp)
	case opAdd:
		a, ok := st.(loop.TaskAdder)
		if !ok {
			return frame{}, fmt.Errorf("%w: adding tasks", ErrUnsupported)
		}
		if req.Task == nil {
			return frame{}, fmt.Errorf("%w: add without a task", ErrRefused)
		}
		nt := *req.Task
		// A check this session's agent wrote is its own, whatever the
		// request says (DESIGN §14: a check an agent wrote is marked).
		nt.CheckBy = ""
		if nt.Check != "" {
			nt.CheckBy = s.plan.Agent
		}
		t, err := a.AddTask(ctx, nt)
		return frame{Task: &t}, err
	case opDepAdd:
		a, ok := st.(loop.TaskAdder)
		if !ok {
			return frame{}, fmt.Errorf("%w: adding dependencies", ErrUnsupported)
		}
		return frame{}, a.AddDependency(ctx, req.Blocked, req.Blocker)
	}
	return frame{}, fmt.Errorf("%w: unknown request %q", ErrRefused, req.Op)
}

// list streams the tasks q selects: the shape first when asked, then one
// frame a task.
func (s *Server) list(ctx context.Context, q *listQuery, w *frameWriter) error {
	l, ok := s.plan.Store.(loop.TaskLister)
	if !ok {
		return fmt.Errorf("%w: listing tasks", ErrUnsupported)
	}
	if q == nil {
		q = &listQuery{}
	}
	lq := loop.ListQuery{Status: q.Status, Feature: q.Feature, Limit: q.Limit}
	if q.Shape {
		lq.Shape = func(sh loop.ListShape) error { return w.send(frame{Shape: &sh}) }
	}
	return l.ListTasks(ctx, lq, func(t loop.Task) error { return w.send(frame{Task: &t}) })
}

// claimParams is the claim the agent asked for, as the broker makes it:
// only in peek mode, only as the session's agent, held by its loop
// (ARCHITECTURE.md §2.2); a claim without a task id takes from the run's
// scope.
func (s *Server) claimParams(c *loop.ClaimParams) (loop.ClaimParams, error) {
	p := s.plan
	if c == nil {
		return loop.ClaimParams{}, fmt.Errorf("%w: claim without its parameters", ErrRefused)
	}
	if p.TaskID != "" {
		// The words of `ralph task claim` in such a session.
		return loop.ClaimParams{}, fmt.Errorf("%w: the ralph loop claimed task %s for you: work on it alone, and end your final answer with "+
			"<task-done>%s</task-done> (or <task-failed>%s</task-failed>); add work the plan lacks with 'task add'", ErrRefused, p.TaskID, p.TaskID, p.TaskID)
	}
	if p.Mode != loop.ModeBuild || p.ClaimMode != loop.ClaimAgent {
		return loop.ClaimParams{}, &RefusalError{Refusal: RefusedClaim, Agent: p.Agent}
	}
	if c.Agent != p.Agent {
		return loop.ClaimParams{}, fmt.Errorf("%w: this session's agent is %s; it cannot claim as %s", ErrRefused, p.Agent, c.Agent)
	}
	out := loop.ClaimParams{TaskID: c.TaskID, Agent: p.Agent, Lease: c.Lease, Holder: p.Holder, Mode: loop.ClaimAgent}
	if out.Lease <= 0 {
		out.Lease = p.Lease
	}
	if out.TaskID == "" {
		out.Scope = p.Scope
	}
	return out, nil
}

// move is the move the agent asked for, as the broker applies it: as the
// session's agent, never as a person, never forced, never as the loop.
// The store then refuses a task the agent does not hold
// (loop.ErrNotHolder) and a claim its loop made (loop.ErrLoopClaim).
func (s *Server) move(m *loop.MoveParams) (loop.MoveParams, error) {
	agent := s.plan.Agent
	switch {
	case m == nil:
		return loop.MoveParams{}, fmt.Errorf("%w: a move without its parameters", ErrRefused)
	case m.By.Force:
		return loop.MoveParams{}, &RefusalError{Refusal: RefusedForce, Agent: agent}
	case m.By.Loop:
		return loop.MoveParams{}, fmt.Errorf("%w: only the ralph loop moves a task as the loop", ErrRefused)
	case m.By.Agent == "":
		return loop.MoveParams{}, fmt.Errorf("%w: agent %s cannot act as a person (%s); it acts as itself (RALPH_AGENT_ID=%s)", ErrRefused, agent, m.By.Name(), agent)
	case m.By.Agent != agent:
		return loop.MoveParams{}, fmt.Errorf("%w: this session's agent is %s; it cannot act as %s", ErrRefused, agent, m.By.Agent)
	}
	return loop.MoveParams{TaskID: m.TaskID, Message: m.Message, By: loop.Actor{Agent: agent, Generation: m.By.Generation}}, nil
}
