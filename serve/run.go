package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/safefile"
)

// Run view limits: the newest maxSessions sessions with an event log are
// read; a worker keeps its last maxEvents agent events; a session with no
// session_end line whose event log has not grown for staleAfter (and that
// is not in a usage-limit wait) is taken for dead (a killed build).
const (
	maxSessions = 5
	maxEvents   = 20
	staleAfter  = 30 * time.Minute
)

type runJSON struct {
	Sessions []sessionJSON `json:"sessions"`
	Workers  []*workerJSON `json:"workers"`
}

type sessionJSON struct {
	Session   string `json:"session"`
	Live      bool   `json:"live"`
	StartedAt string `json:"started_at"`
}

type eventJSON struct {
	At      string `json:"at"`
	Kind    string `json:"kind"`
	Text    string `json:"text,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Input   string `json:"input,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

type waitJSON struct {
	Until   string `json:"until,omitempty"`
	Message string `json:"message"`
}

// workerJSON is one worker of /api/run and of a `run` event.
type workerJSON struct {
	Worker    string          `json:"worker"`
	Session   string          `json:"session,omitempty"`
	Task      *loop.EventTask `json:"task"`
	Iteration int             `json:"iteration,omitempty"`
	Model     string          `json:"model,omitempty"`
	StartedAt string          `json:"started_at,omitempty"`
	Events    []eventJSON     `json:"events"`
	Wait      *waitJSON       `json:"wait"`
	// Phase is the step after the agent's session the worker is in
	// ("verify", "gate", "integrate"), empty otherwise.
	Phase  string `json:"phase,omitempty"`
	Holder string `json:"holder,omitempty"`
	// Stale says why the claim of a worker shown from the store no longer
	// stands (staleness).
	Stale string `json:"stale,omitempty"`
	// Ended is set on the `run` event of a worker whose run ended.
	Ended bool `json:"ended,omitempty"`
}

// session is what an event log said so far, read incrementally.
type session struct {
	name    string
	offset  int64
	started time.Time
	last    time.Time // the newest line's time
	workers map[string]*workerJSON
	order   []string
	ended   map[string]bool
	// holder is the build's process, from its iteration_start lines;
	// deadSent is set once the page was told it is gone.
	holder   loop.Holder
	deadSent bool
	modTime  time.Time
}

// runs caches the sessions' event logs, read from where they were left.
type runs struct {
	mu       sync.Mutex
	sessions map[string]*session
}

// workerName is the name of a note's worker: "main" for a run without
// workers.
func workerName(w string) string {
	if w == "" {
		return "main"
	}
	return w
}

// update reads what the session's event log gained since the last read
// and returns the workers whose state changed.
func (se *session) update(base, path string) ([]string, error) {
	f, err := safefile.Open(base, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	se.modTime = fi.ModTime()
	if fi.Size() < se.offset { // rewritten: start again
		*se = session{name: se.name}
	}
	if se.workers == nil {
		se.workers, se.ended = map[string]*workerJSON{}, map[string]bool{}
	}
	if fi.Size() == se.offset {
		return nil, nil
	}
	// In chunks: the first read of a long session's log need not hold it
	// all at once.
	var changed []string
	buf := make([]byte, min(fi.Size()-se.offset, readChunk))
	for se.offset < fi.Size() {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), fi.Size()-se.offset)], se.offset)
		if err != nil && !errors.Is(err, io.EOF) {
			return changed, err
		}
		data := buf[:n]
		end := bytes.LastIndexByte(data, '\n')
		switch {
		case end < 0 && n == readChunk:
			se.offset += int64(n) // a line longer than a chunk: no line of ours
			continue
		case end < 0:
			return changed, nil // no whole line yet
		}
		se.offset += int64(end + 1)
		for line := range bytes.Lines(data[:end+1]) {
			if name, ok := se.line(line); ok && !slices.Contains(changed, name) {
				changed = append(changed, name)
			}
		}
	}
	return changed, nil
}

// readChunk bounds what update reads at once.
const readChunk = 1 << 20

// line applies one line of the event log and returns the worker it is
// about; ok is false for a line that is not an event line.
func (se *session) line(line []byte) (worker string, ok bool) {
	var e loop.EventLine
	if json.Unmarshal(line, &e) != nil {
		return "", false
	}
	if se.started.IsZero() {
		se.started = e.At
	}
	if h, err := loop.ParseHolder(e.Holder); e.Holder != "" && err == nil {
		se.holder = h
	}
	se.last = e.At
	name := workerName(e.Worker)
	w := se.workers[name]
	if w == nil {
		w = &workerJSON{Worker: name, Session: se.name, Events: []eventJSON{}}
		se.workers[name] = w
		se.order = append(se.order, name)
	}
	apply(w, e)
	if e.Kind == loop.NoteSessionEnd {
		se.ended[name] = true
	}
	return name, true
}

// apply updates a worker with one line of its event log.
func apply(w *workerJSON, e loop.EventLine) {
	at := jsonTime(e.At)
	switch e.Kind {
	case loop.NoteIterationStart:
		w.Task, w.Iteration, w.Model, w.StartedAt, w.Wait, w.Phase = e.Task, e.Iteration, e.Model, at, nil, ""
		w.Events = w.Events[:0] // a new task: its own events
	case loop.NoteAgentEvent:
		if e.Event == nil {
			return
		}
		if e.Event.Model != "" {
			w.Model = e.Event.Model
		}
		text := e.Event.Text
		if text == "" {
			text = e.Event.Error
		}
		w.Events = append(w.Events, eventJSON{At: at, Kind: string(e.Event.Kind), Text: text, Tool: e.Event.Tool,
			Input: e.Event.Input, IsError: e.Event.IsError})
		if len(w.Events) > maxEvents {
			w.Events = slices.Delete(w.Events, 0, len(w.Events)-maxEvents)
		}
		if e.Event.ResetsAt != nil {
			w.Wait = &waitJSON{Until: jsonTime(*e.Event.ResetsAt), Message: text}
		}
	case loop.NoteWait:
		w.Wait = &waitJSON{Message: e.Message}
		if e.Until != nil {
			w.Wait.Until = jsonTime(*e.Until)
		}
	case loop.NoteWaitAgents:
		w.Wait = &waitJSON{Message: e.Message}
	case loop.NotePhaseStart:
		w.Phase = e.Phase
	case loop.NotePhaseEnd:
		w.Phase = ""
	case loop.NoteIterationEnd:
		w.Task, w.Wait, w.Phase = nil, nil, ""
	case loop.NoteSessionEnd:
		w.Task, w.Wait, w.Phase, w.Ended = nil, nil, "", true
	}
}

// live reports whether the session's run goes on: its build's process
// is not known to be gone, some worker has not ended, and the log grew
// lately or a wait is under way.
func (se *session) live(now time.Time) bool {
	if len(se.workers) == 0 || se.holder.Liveness() == loop.HolderGone {
		return false // a build killed before its session_end line
	}
	open := false
	for name, w := range se.workers {
		if se.ended[name] {
			continue
		}
		open = true
		if w.Wait != nil && w.Wait.Until != "" {
			if u, err := time.Parse(time.RFC3339Nano, w.Wait.Until); err == nil && u.After(now) {
				return true
			}
		}
	}
	return open && now.Sub(se.modTime) < staleAfter
}

// recentSessions lists the newest sessions of logDir (reached from base
// without following a link) that have an event log, newest first
// (session names sort by time). A session directory or event log that is
// a link is left out.
func recentSessions(base, logDir string, limit int) ([]string, error) {
	d, err := safefile.OpenDir(base, logDir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, safefile.ErrLink) {
		return nil, nil // a linked log directory is shown as none (ralph serve says why at its start)
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var names []string
	for i := len(entries) - 1; i >= 0 && len(names) < limit; i-- {
		e := entries[i]
		if !e.IsDir() || !validName(e.Name()) {
			continue
		}
		if fi, err := d.Lstat(filepath.Join(e.Name(), loop.EventLogName)); err == nil && fi.Mode().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// refresh reads the session's event log and returns the session and the
// workers whose state changed.
func (s *Server) refresh(name string) (*session, []*workerJSON, error) {
	rs := &s.runs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.sessions == nil {
		rs.sessions = map[string]*session{}
	}
	se := rs.sessions[name]
	if se == nil {
		se = &session{name: name}
		rs.sessions[name] = se
	}
	changed, err := se.update(s.base(), loop.EventLogPath(s.cfg.LogDir, name))
	if err != nil {
		return nil, nil, err
	}
	var out []*workerJSON
	for _, c := range changed {
		w := *se.workers[c]
		w.Events = slices.Clone(w.Events)
		out = append(out, &w)
	}
	return se, out, nil
}

// readRun is /api/run: the workers of the live sessions, then the active
// claims of the store that no live worker explains.
func (s *Server) readRun(ctx context.Context) (*runJSON, error) {
	names, err := recentSessions(s.base(), s.cfg.LogDir, maxSessions)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	out := &runJSON{Sessions: []sessionJSON{}, Workers: []*workerJSON{}}
	shown := map[string]bool{}
	for _, name := range names {
		se, _, err := s.refresh(name)
		if err != nil {
			continue // removed meanwhile
		}
		s.runs.mu.Lock()
		live := se.live(now)
		out.Sessions = append(out.Sessions, sessionJSON{Session: name, Live: live, StartedAt: jsonTime(se.started)})
		if live {
			for _, wn := range se.order {
				if se.ended[wn] {
					continue
				}
				w := *se.workers[wn]
				w.Events = slices.Clone(w.Events)
				out.Workers = append(out.Workers, &w)
				if w.Task != nil {
					shown[w.Task.ID] = true
				}
			}
		}
		s.runs.mu.Unlock()
	}
	taken := map[string]bool{}
	for _, w := range out.Workers {
		taken[w.Worker] = true
	}
	err = s.cfg.Store.EachTask(ctx, dag.ListParams{Status: loop.StatusInProgress}, func(t loop.Task) error {
		if shown[t.ID] {
			return nil
		}
		// A claim no live event log explains: another machine's agent,
		// a person, a build of another project directory. Its name is
		// its holder's.
		name := t.ClaimedBy
		if taken[name] {
			name += " (" + t.ID + ")" // one holder, several claims
		}
		taken[name] = true
		out.Workers = append(out.Workers, &workerJSON{Worker: name, Task: &loop.EventTask{ID: t.ID, Title: t.Title},
			StartedAt: jsonTime(t.ClaimedAt), Events: []eventJSON{}, Holder: holderText(t), Stale: staleness(t, now)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
