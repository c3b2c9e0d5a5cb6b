package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// runLister is what the view reads of the run records (DESIGN §15) of a
// store that keeps them: loop.RunRecorder's Runs.
type runLister interface {
	Runs(ctx context.Context, n int) ([]loop.RunRecord, error)
}

// defaultRuns is how many runs /api/runs lists without ?n.
const defaultRuns = 50

// readRuns returns the latest n run records, newest first; none from a
// store that keeps none.
func (s *Server) readRuns(ctx context.Context, n int) ([]loop.RunLine, error) {
	out := []loop.RunLine{}
	rl, ok := s.cfg.Store.(runLister)
	if !ok {
		return out, nil
	}
	runs, err := rl.Runs(ctx, n)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		out = append(out, loop.RunLineOf(r))
	}
	return out, nil
}

// apiRuns is GET /api/runs?n=N: the latest N runs (default 50; 0 all).
func (s *Server) apiRuns(w http.ResponseWriter, r *http.Request) {
	n := defaultRuns
	if v := r.URL.Query().Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			jsonError(w, http.StatusBadRequest, fmt.Sprintf("n=%q: want a number of runs, 0 for all", v))
			return
		}
	}
	runs, err := s.readRuns(r.Context(), n)
	if err != nil {
		s.storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": runs})
}

// reachTimeout bounds the look at a plan on a server that each API
// request starts with: an unreachable server is answered within it.
const reachTimeout = 800 * time.Millisecond

// ErrUnreachable is the error of a request whose store did not answer
// within reachTimeout.
var ErrUnreachable = errors.New("the plan's store is unreachable")

// reachable looks at a plan on a database server (Config.DBPath empty)
// within reachTimeout: one small read. A SQLite file is always there.
func (s *Server) reachable(ctx context.Context) error {
	if s.cfg.DBPath != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	if _, err := s.cfg.Store.Receipts(ctx, 1); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return fmt.Errorf("%w: no answer within %v", ErrUnreachable, reachTimeout)
		}
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	return nil
}

// storeError answers a request whose store call failed: 503 when the
// store is unreachable, else 500; the JSON says which.
func (s *Server) storeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	if errors.Is(err, ErrUnreachable) {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"error": err.Error(), "unreachable": status == http.StatusServiceUnavailable})
}
