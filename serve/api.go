package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/safefile"
)

// planTask is a task of /api/plan.
type planTask struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Status    string `json:"status"`
	Priority  int    `json:"priority"`
	ParentID  string `json:"parent_id,omitempty"`
	Feature   string `json:"feature,omitempty"`
	ClaimedBy string `json:"claimed_by,omitempty"`
	ClaimedAt string `json:"claimed_at,omitempty"`
	Holder    string `json:"holder,omitempty"`
	// Stale says why an in_progress task's claim no longer stands
	// (staleness), empty while it does.
	Stale        string   `json:"stale,omitempty"`
	Ready        bool     `json:"ready"`
	BlockedBy    []string `json:"blocked_by"`
	RetryCount   int      `json:"retry_count"`
	Verification string   `json:"verification,omitempty"`
	X            int      `json:"x"`
	Y            int      `json:"y"`
	Layer        int      `json:"layer"`
	// Task page only.
	Description string `json:"description,omitempty"`
	CreatedAt   string `json:"created_at,omitempty"`
	UpdatedAt   string `json:"updated_at,omitempty"`
}

type planCounts struct {
	Open    int `json:"open"`
	Active  int `json:"active"`
	Done    int `json:"done"`
	Failed  int `json:"failed"`
	Blocked int `json:"blocked"`
	Total   int `json:"total"`
}

type planJSON struct {
	Version  string     `json:"version"`
	Counts   planCounts `json:"counts"`
	Tasks    []planTask `json:"tasks"`
	Features []string   `json:"features"`
	// LastRun is the latest run record, null while there is none (or the
	// store keeps none).
	LastRun *loop.RunLine `json:"last_run"`
}

func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func holderText(t loop.Task) string {
	if t.ClaimedBy == "" {
		return ""
	}
	if t.Holder.PID > 0 {
		return fmt.Sprintf("%s (pid %d)", t.ClaimedBy, t.Holder.PID)
	}
	return t.ClaimedBy
}

func toPlanTask(t loop.Task) planTask {
	b := t.BlockedBy
	if b == nil {
		b = []string{}
	}
	return planTask{ID: t.ID, Title: t.Title, Status: string(t.Status), Priority: t.Priority, ParentID: t.ParentID,
		Feature: t.Feature, ClaimedBy: t.ClaimedBy, ClaimedAt: jsonTime(t.ClaimedAt), Holder: holderText(t),
		BlockedBy: b, RetryCount: t.RetryCount, Verification: t.VerificationStatus}
}

// buildPlan reads the whole plan, with its layout, and its version: a
// hash of what the page shows of it, the same as long as nothing shown
// changed.
func (s *Server) readPlan(ctx context.Context) (*planJSON, error) {
	var tasks []loop.Task
	err := s.cfg.Store.EachTask(ctx, dag.ListParams{}, func(t loop.Task) error {
		tasks = append(tasks, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	p := planOf(tasks, s.cfg.Now())
	runs, err := s.readRuns(ctx, 1)
	if err != nil {
		return nil, err
	}
	if len(runs) > 0 {
		p.LastRun = &runs[0]
		// A run that begins or ends changes what the page shows.
		r := runs[0]
		p.Version += fmt.Sprintf(".%d.%s.%s", r.ID, r.Outcome, r.EndedAt)
	}
	return p, nil
}

// staleness says why t's claim no longer stands although t is still
// in_progress: its holder process is gone (on this host), or its lease ran
// out. The view changes nothing: the next ralph command that writes to the
// plan recovers such a claim (ARCHITECTURE.md §2.2), and until then the page
// says so rather than show a dead agent at work.
func staleness(t loop.Task, now time.Time) string {
	if t.Status != loop.StatusInProgress {
		return ""
	}
	if t.Holder.Liveness() == loop.HolderGone {
		return "holder gone"
	}
	if !t.LeaseExpiresAt.IsZero() && now.After(t.LeaseExpiresAt) {
		return "lease expired"
	}
	return ""
}

func planOf(tasks []loop.Task, now time.Time) *planJSON {
	p := &planJSON{Tasks: make([]planTask, len(tasks)), Features: []string{}}
	status := make(map[string]loop.Status, len(tasks))
	parents := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		status[t.ID] = t.Status
		if t.ParentID != "" {
			parents[t.ParentID] = true
		}
	}
	nodes := make([]layoutNode, len(tasks))
	features := map[string]bool{}
	h := fnv.New64a()
	for i, t := range tasks {
		pt := toPlanTask(t)
		pt.Ready = ready(t, parents[t.ID], status)
		pt.Stale = staleness(t, now)
		p.Tasks[i] = pt
		nodes[i] = layoutNode{id: t.ID, parent: t.ParentID, feature: t.Feature, blockers: t.BlockedBy}
		if t.Feature != "" && !features[t.Feature] {
			features[t.Feature] = true
			p.Features = append(p.Features, t.Feature)
		}
		switch t.Status {
		case loop.StatusPending:
			p.Counts.Open++
		case loop.StatusInProgress:
			p.Counts.Active++
		case loop.StatusDone:
			p.Counts.Done++
		case loop.StatusFailed:
			p.Counts.Failed++
		case loop.StatusBlocked:
			p.Counts.Blocked++
		}
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%s\x00%s\x00%d\x00%s\x00%s\x00%v\x00%s\x01", t.ID, t.Title, t.Status, t.Priority,
			t.ParentID, t.Feature, t.RetryCount, t.ClaimedBy, t.VerificationStatus, t.BlockedBy, pt.Stale)
	}
	p.Counts.Total = len(tasks)
	slices.Sort(p.Features)
	for i, pl := range layout(nodes) {
		p.Tasks[i].X, p.Tasks[i].Y, p.Tasks[i].Layer = pl.x, pl.y, pl.layer
	}
	p.Version = strconv.FormatUint(h.Sum64(), 36)
	return p
}

// ready reports whether t is on the plan's ready frontier, by the rule of
// ARCHITECTURE.md §2 that claims follow: pending, a leaf (hasChildren
// false), its parent not failed, every blocker done. status holds the
// statuses of t's parent and blockers; a blocker missing from it (not in
// the plan) does not hold t back, as in the store.
func ready(t loop.Task, hasChildren bool, status map[string]loop.Status) bool {
	if t.Status != loop.StatusPending || hasChildren {
		return false
	}
	if t.ParentID != "" && status[t.ParentID] == loop.StatusFailed {
		return false
	}
	for _, b := range t.BlockedBy {
		if st, ok := status[b]; ok && st != loop.StatusDone {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func jsonError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func (s *Server) apiPlan(w http.ResponseWriter, r *http.Request) {
	p, err := s.readPlan(r.Context())
	if err != nil {
		s.storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

type taskRef struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Status  string `json:"status"`
	Summary string `json:"summary,omitempty"`
}

type historyJSON struct {
	At      string `json:"at"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Actor   string `json:"actor"`
}

type rawLogJSON struct {
	Name      string `json:"name"`
	URL       string `json:"url"`
	Session   string `json:"session"`
	Iteration int    `json:"iteration"`
	Worker    string `json:"worker,omitempty"`
}

type taskJSON struct {
	Task     planTask            `json:"task"`
	Parent   *taskRef            `json:"parent"`
	Blockers []taskRef           `json:"blockers"`
	Children []taskRef           `json:"children"`
	History  []historyJSON       `json:"history"`
	Receipts []loop.EventReceipt `json:"receipts"`
	RawLogs  []rawLogJSON        `json:"raw_logs"`
}

// summary is what a task's completion logged: the message of its last
// "done" entry.
func (s *Server) summary(r *http.Request, id string) string {
	logs, err := s.cfg.Store.Logs(r.Context(), id)
	if err != nil {
		return ""
	}
	for i := len(logs) - 1; i >= 0; i-- {
		if logs[i].Kind == loop.LogDone {
			return logs[i].Message
		}
	}
	return ""
}

func (s *Server) apiTask(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx := r.Context()
	t, err := s.cfg.Store.Get(ctx, id)
	if errors.Is(err, loop.ErrNotFound) {
		jsonError(w, http.StatusNotFound, fmt.Sprintf("no task %q in the plan", id))
		return
	}
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := taskJSON{Task: toPlanTask(t), Blockers: []taskRef{}, Children: []taskRef{}, History: []historyJSON{},
		Receipts: []loop.EventReceipt{}, RawLogs: []rawLogJSON{}}
	out.Task.Description, out.Task.CreatedAt, out.Task.UpdatedAt = t.Description, jsonTime(t.CreatedAt), jsonTime(t.UpdatedAt)
	status := map[string]loop.Status{}
	if t.ParentID != "" {
		if p, err := s.cfg.Store.Get(ctx, t.ParentID); err == nil {
			out.Parent = &taskRef{ID: p.ID, Title: p.Title, Status: string(p.Status)}
			status[p.ID] = p.Status
		}
	}
	for _, b := range t.BlockedBy {
		bt, err := s.cfg.Store.Get(ctx, b)
		if err != nil {
			out.Blockers = append(out.Blockers, taskRef{ID: b, Status: "unknown"})
			continue
		}
		status[bt.ID] = bt.Status
		out.Blockers = append(out.Blockers, taskRef{ID: bt.ID, Title: bt.Title, Status: string(bt.Status), Summary: s.summary(r, bt.ID)})
	}
	err = s.cfg.Store.EachTask(ctx, dag.ListParams{}, func(c loop.Task) error {
		if c.ParentID == t.ID {
			out.Children = append(out.Children, taskRef{ID: c.ID, Title: c.Title, Status: string(c.Status)})
		}
		return nil
	})
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out.Task.Ready = ready(t, len(out.Children) > 0, status)
	out.Task.Stale = staleness(t, s.cfg.Now())
	logs, err := s.cfg.Store.Logs(ctx, t.ID)
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err.Error())
		return
	}
	for _, l := range logs {
		out.History = append(out.History, historyJSON{At: jsonTime(l.At), Kind: l.Kind, Message: l.Message, Actor: l.Actor})
	}
	rs, err := s.cfg.Store.Receipts(ctx, 0)
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err.Error())
		return
	}
	seen := map[string]bool{}
	for i := len(rs) - 1; i >= 0; i-- { // oldest first
		rc := rs[i]
		if rc.TaskID != t.ID {
			continue
		}
		out.Receipts = append(out.Receipts, loop.EventReceiptOf(rc))
		out.RawLogs = append(out.RawLogs, s.rawLogs(rc, seen)...)
	}
	writeJSON(w, http.StatusOK, out)
}

// rawLogs lists the raw streams of a receipt's iteration that exist:
// [<worker>-]iter-<n>.ndjson and its -verify twin.
func (s *Server) rawLogs(rc loop.Receipt, seen map[string]bool) []rawLogJSON {
	if !validName(rc.Session) {
		return nil
	}
	name := loop.RawLogName(rc.Worker, rc.Iteration, rc.Mode == "verify", rc.Agent)
	key := rc.Session + "/" + name
	if seen[key] || !validName(name) {
		return nil
	}
	if fi, err := safefile.Lstat(s.base(), filepath.Join(s.cfg.LogDir, rc.Session, name)); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	seen[key] = true
	return []rawLogJSON{{Name: name, URL: "/logs/" + rc.Session + "/" + name, Session: rc.Session,
		Iteration: rc.Iteration, Worker: rc.Worker}}
}

func (s *Server) apiReceipts(w http.ResponseWriter, r *http.Request) {
	rs, err := s.cfg.Store.Receipts(r.Context(), 0)
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := make([]loop.EventReceipt, 0, len(rs))
	for i := len(rs) - 1; i >= 0; i-- {
		out = append(out, loop.EventReceiptOf(rs[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"receipts": out})
}

func (s *Server) apiRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.readRun(r.Context())
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, run)
}
