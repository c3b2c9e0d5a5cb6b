package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/serve"
)

const session = "session-20261124-050000"

// fixture is a project: a plan on a SQLite file with a dependency, a
// parent, a done task with a summary, an active claim, two receipts, an
// event log of a two-worker run under way and a raw stream.
type fixture struct {
	dir    string
	dbPath string
	logDir string
	store  *dag.Store
	ro     *dag.Store
	events *loop.EventLog
}

var t0 = time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, dbPath: filepath.Join(dir, ".ralph", "progress.db"), logDir: filepath.Join(dir, ".ralph", "logs")}
	if err := os.MkdirAll(f.logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	st, err := dag.Open(ctx, f.dbPath, dag.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f.store = st
	if _, err := st.AddFeature(ctx, dag.FeatureParams{Name: "auth"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []dag.AddParams{
		{ID: "epic", Title: "Login epic", Priority: 2},
		{ID: "schema", Title: "Design schema", Description: "Three tables.", Priority: 1, Feature: "auth"},
		{ID: "api", Title: "Write the API", Priority: 2, BlockedBy: []string{"schema"}, Feature: "auth", ParentID: "epic"},
		{ID: "ui", Title: "Build the UI", Priority: 2, BlockedBy: []string{"api"}, ParentID: "epic"},
		{ID: "docs", Title: "Docs", Priority: 3},
	} {
		if _, err := st.Add(ctx, p); err != nil {
			t.Fatalf("Add %s: %v", p.ID, err)
		}
	}
	claim(t, st, "schema", "ralph-abc-w1")
	if err := st.Complete(ctx, loop.MoveParams{TaskID: "schema", Message: "Schema designed: users, sessions, tokens.", By: loop.Actor{Agent: "ralph-abc-w1"}}); err != nil {
		t.Fatal(err)
	}
	claim(t, st, "api", "ralph-abc-w1")
	for i, r := range []loop.Receipt{
		{Session: session, Iteration: 1, Mode: "build", TaskID: "schema", Model: "claude-sonnet-4-5", Worker: "w1", Agent: "claude",
			InputTokens: 1000, OutputTokens: 200, CostUSD: 0.25, StartedAt: t0, Duration: time.Minute, Turns: 5, ExitReason: "success"},
		{Session: session, Iteration: 1, Mode: "verify", TaskID: "schema", Model: "gpt-5.5", Worker: "w1", Agent: "codex",
			InputTokens: 500, OutputTokens: 50, CostUSD: 0.5, StartedAt: t0.Add(time.Minute), Duration: 30 * time.Second, Turns: 2, Verdict: "pass"},
	} {
		if err := st.RecordReceipt(ctx, r); err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(f.logDir, session), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.logDir, session, "w1-iter-1.ndjson"), []byte(`{"type":"system"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The verifier was Codex: its stream is named after it.
	if err := os.WriteFile(filepath.Join(f.logDir, session, "w1-iter-1-verify-codex.ndjson"), []byte(`{"type":"thread.started"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev, err := loop.OpenEventLog(loop.EventLogPath(f.logDir, session))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	f.events = ev
	now := time.Now()
	ev.Observe(loop.Note{Kind: loop.NoteIterationStart, At: now, Session: session, Worker: "w1", Iteration: 2, Task: loop.Task{ID: "api", Title: "Write the API"}, Model: "sonnet"})
	ev.Observe(loop.Note{Kind: loop.NoteAgentEvent, At: now, Session: session, Worker: "w1", Iteration: 2, AgentEvent: loop.Event{Kind: loop.EventToolUse, Tool: "Bash", Input: "go test ./..."}})
	ev.Observe(loop.Note{Kind: loop.NoteWait, At: now, Session: session, Worker: "w2", Until: now.Add(time.Hour), Wait: time.Hour, Message: "usage limit reached"})

	ro, err := dag.OpenExisting(ctx, f.dbPath, dag.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	f.ro = ro
	return f
}

func claim(t *testing.T, st *dag.Store, id, agent string) {
	t.Helper()
	if _, err := st.Claim(t.Context(), loop.ClaimParams{TaskID: id, Agent: agent, Lease: time.Hour}); err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
}

func (f *fixture) server(t *testing.T, mod func(*serve.Config)) (*serve.Server, *httptest.Server) {
	t.Helper()
	cfg := serve.Config{Store: f.ro, DBPath: f.dbPath, LogDir: f.logDir}
	if mod != nil {
		mod(&cfg)
	}
	s, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		hs.Close()
	})
	return s, hs
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, body := get(t, url)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q", url, ct)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

type planTask struct {
	ID        string   `json:"id"`
	Status    string   `json:"status"`
	ParentID  string   `json:"parent_id"`
	ClaimedBy string   `json:"claimed_by"`
	Ready     bool     `json:"ready"`
	BlockedBy []string `json:"blocked_by"`
	Layer     int      `json:"layer"`
}

type plan struct {
	Version  string         `json:"version"`
	Counts   map[string]int `json:"counts"`
	Tasks    []planTask     `json:"tasks"`
	Features []string       `json:"features"`
}

func TestAPIPlan(t *testing.T) {
	f := newFixture(t)
	_, hs := f.server(t, nil)
	var p plan
	getJSON(t, hs.URL+"/api/plan", &p)
	if p.Version == "" {
		t.Error("no version")
	}
	wantCounts := map[string]int{"open": 3, "active": 1, "done": 1, "failed": 0, "blocked": 0, "total": 5}
	if diff := cmp.Diff(wantCounts, p.Counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	want := []planTask{
		{ID: "epic", Status: "pending", BlockedBy: []string{}, Layer: 0}, // a parent: never claimed itself
		{ID: "schema", Status: "done", BlockedBy: []string{}, Layer: 0},
		{ID: "api", Status: "in_progress", ParentID: "epic", ClaimedBy: "ralph-abc-w1", BlockedBy: []string{"schema"}, Layer: 1},
		{ID: "ui", Status: "pending", ParentID: "epic", BlockedBy: []string{"api"}, Layer: 2},
		{ID: "docs", Status: "pending", Ready: true, BlockedBy: []string{}, Layer: 0},
	}
	if diff := cmp.Diff(want, p.Tasks); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"auth"}, p.Features); diff != "" {
		t.Errorf("features (-want +got):\n%s", diff)
	}
	// The same plan, the same version.
	var again plan
	getJSON(t, hs.URL+"/api/plan", &again)
	if again.Version != p.Version {
		t.Errorf("version changed with nothing changed: %s, %s", p.Version, again.Version)
	}
}

func TestAPITask(t *testing.T) {
	f := newFixture(t)
	_, hs := f.server(t, nil)
	var got struct {
		Task struct {
			ID          string `json:"id"`
			Description string `json:"description"`
			Status      string `json:"status"`
		} `json:"task"`
		Parent   *struct{ ID, Title, Status string } `json:"parent"`
		Blockers []struct{ ID, Title, Status, Summary string }
		History  []struct{ Kind, Actor, Message string }
		Receipts []struct {
			Mode    string  `json:"mode"`
			CostUSD float64 `json:"cost_usd"`
		}
		RawLogs []struct{ Name, URL string } `json:"raw_logs"`
	}
	getJSON(t, hs.URL+"/api/task/api", &got)
	if got.Task.ID != "api" || got.Task.Status != "in_progress" {
		t.Errorf("task = %+v", got.Task)
	}
	if got.Parent == nil || got.Parent.ID != "epic" || got.Parent.Title != "Login epic" {
		t.Errorf("parent = %+v", got.Parent)
	}
	wantBlockers := []struct{ ID, Title, Status, Summary string }{{"schema", "Design schema", "done", "Schema designed: users, sessions, tokens."}}
	if diff := cmp.Diff(wantBlockers, got.Blockers); diff != "" {
		t.Errorf("blockers (-want +got):\n%s", diff)
	}
	if len(got.History) == 0 || got.History[0].Kind != loop.LogClaim || got.History[0].Actor != "ralph-abc-w1" {
		t.Errorf("history = %+v, want the claim first", got.History)
	}

	// The done task has the receipts and the raw stream.
	getJSON(t, hs.URL+"/api/task/schema", &got)
	if got.Task.Description != "Three tables." {
		t.Errorf("description %q", got.Task.Description)
	}
	if len(got.Receipts) != 2 || got.Receipts[0].Mode != "build" || got.Receipts[1].Mode != "verify" {
		t.Errorf("receipts = %+v, want build then verify", got.Receipts)
	}
	wantRaw := []struct{ Name, URL string }{{"w1-iter-1.ndjson", "/logs/" + session + "/w1-iter-1.ndjson"},
		{"w1-iter-1-verify-codex.ndjson", "/logs/" + session + "/w1-iter-1-verify-codex.ndjson"}}
	if diff := cmp.Diff(wantRaw, got.RawLogs); diff != "" {
		t.Errorf("raw logs (-want +got):\n%s", diff)
	}
	resp, body := get(t, hs.URL+got.RawLogs[0].URL)
	if resp.StatusCode != 200 || body != `{"type":"system"}`+"\n" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("raw log: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	resp, body = get(t, hs.URL+"/api/task/nope")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"error"`) {
		t.Errorf("unknown task: %d %s", resp.StatusCode, body)
	}
}

func TestAPIReceipts(t *testing.T) {
	f := newFixture(t)
	_, hs := f.server(t, nil)
	var got struct {
		Receipts []map[string]any `json:"receipts"`
	}
	getJSON(t, hs.URL+"/api/receipts", &got)
	if len(got.Receipts) != 2 {
		t.Fatalf("%d receipts", len(got.Receipts))
	}
	first := got.Receipts[0]
	for _, k := range []string{"session", "iteration", "mode", "task_id", "model", "worker", "agent", "input_tokens", "output_tokens",
		"cache_read_tokens", "cache_write_tokens", "cost_usd", "cost_source", "started_at", "duration_seconds", "turns", "exit_reason", "verdict"} {
		if _, ok := first[k]; !ok {
			t.Errorf("receipt has no %q", k)
		}
	}
	if first["mode"] != "build" || first["duration_seconds"] != 60.0 || first["cost_source"] != "reported" {
		t.Errorf("oldest receipt = %v", first)
	}
}

func TestAPIRun(t *testing.T) {
	f := newFixture(t)
	_, hs := f.server(t, nil)
	var got struct {
		Sessions []struct {
			Session string
			Live    bool
		}
		Workers []struct {
			Worker string
			Task   *struct{ ID, Title string }
			Model  string
			Events []struct{ Kind, Tool, Input string }
			Wait   *struct{ Until, Message string }
		}
	}
	getJSON(t, hs.URL+"/api/run", &got)
	if len(got.Sessions) != 1 || got.Sessions[0].Session != session || !got.Sessions[0].Live {
		t.Errorf("sessions = %+v", got.Sessions)
	}
	if len(got.Workers) != 2 {
		t.Fatalf("workers = %+v, want w1 and w2", got.Workers)
	}
	w1, w2 := got.Workers[0], got.Workers[1]
	if w1.Worker != "w1" || w1.Task == nil || w1.Task.ID != "api" || w1.Model != "sonnet" ||
		len(w1.Events) != 1 || w1.Events[0].Tool != "Bash" || w1.Events[0].Input != "go test ./..." {
		t.Errorf("w1 = %+v", w1)
	}
	if w2.Worker != "w2" || w2.Wait == nil || w2.Wait.Until == "" || w2.Wait.Message != "usage limit reached" {
		t.Errorf("w2 = %+v", w2)
	}
}

func TestAssets(t *testing.T) {
	f := newFixture(t)
	_, hs := f.server(t, nil)
	for path, ctype := range map[string]string{"/": "text/html; charset=utf-8", "/assets/app.js": "text/javascript; charset=utf-8",
		"/assets/style.css": "text/css; charset=utf-8"} {
		resp, body := get(t, hs.URL+path)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ctype || len(body) < 100 {
			t.Errorf("GET %s: %d %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		if resp.Header.Get("ETag") == "" {
			t.Errorf("GET %s: no ETag", path)
		}
	}
	for _, path := range []string{"/assets/nope.js", "/assets/", "/nope"} {
		if resp, _ := get(t, hs.URL+path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
}

// Every answer has the security headers and no CORS header; only GET (and
// HEAD) is served.
func TestHeadersAndMethods(t *testing.T) {
	f := newFixture(t)
	_, hs := f.server(t, nil)
	for _, path := range []string{"/", "/api/plan", "/api/task/nope", "/logs/x/y"} {
		resp, _ := get(t, hs.URL+path, "Origin", "http://evil.example")
		want := map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, v)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		for k := range resp.Header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("GET %s: CORS header %s", path, k)
			}
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		req, _ := http.NewRequestWithContext(t.Context(), m, hs.URL+"/api/plan", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", m, resp.StatusCode)
		}
	}
}

func TestAuth(t *testing.T) {
	const token = "s3cret-token-value"
	f := newFixture(t)
	_, hs := f.server(t, func(c *serve.Config) { c.Token = token })
	check := func(name string, resp *http.Response, body string, want int) {
		t.Helper()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, want)
		}
		if strings.Contains(body, token) {
			t.Errorf("%s: the answer holds the token", name)
		}
		for k, vs := range resp.Header {
			for _, v := range vs {
				if strings.Contains(v, token) && k != "Set-Cookie" {
					t.Errorf("%s: header %s holds the token", name, k)
				}
			}
		}
	}
	resp, body := get(t, hs.URL+"/api/plan")
	check("no token", resp, body, http.StatusUnauthorized)
	if !strings.Contains(body, "needs its token") {
		t.Errorf("401 body %q", body)
	}
	resp, body = get(t, hs.URL+"/api/plan", "Authorization", "Bearer wrong")
	check("wrong bearer", resp, body, http.StatusUnauthorized)
	resp, body = get(t, hs.URL+"/api/plan", "Authorization", "Bearer "+token)
	check("bearer", resp, body, http.StatusOK)
	resp, body = get(t, hs.URL+"/?token=wrong")
	check("wrong ?token", resp, body, http.StatusUnauthorized)
	resp, body = get(t, hs.URL+"/?token="+token)
	check("?token", resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); loc != "/" {
		t.Errorf("redirect to %q, want / (the token dropped)", loc)
	}
	// The cookie is named after the port (browsers send a host's cookies
	// to all its ports) and holds a key derived from the token, not the
	// token.
	name := "ralph_token_" + hs.URL[strings.LastIndex(hs.URL, ":")+1:]
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == name {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || strings.Contains(cookie.Value, token) {
		t.Fatalf("cookie = %+v, want HttpOnly SameSite=Strict %s without the token in it", cookie, name)
	}
	resp, body = get(t, hs.URL+"/api/plan", "Cookie", name+"="+cookie.Value)
	check("cookie", resp, body, http.StatusOK)
	resp, body = get(t, hs.URL+"/api/plan", "Cookie", name+"=wrong")
	check("wrong cookie", resp, body, http.StatusUnauthorized)
	resp, body = get(t, hs.URL+"/api/plan", "Cookie", name+"="+token)
	check("the token itself as the cookie", resp, body, http.StatusUnauthorized)
	resp, body = get(t, hs.URL+"/api/plan", "Cookie", "ralph_token_1="+cookie.Value)
	check("another port's cookie", resp, body, http.StatusUnauthorized)
	// A path that would make the redirect leave for another host keeps
	// one slash.
	resp, body = get(t, hs.URL+"//evil.example/x?token="+token)
	check("//host ?token", resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); loc != "/evil.example/x" {
		t.Errorf("redirect to %q, want /evil.example/x", loc)
	}
}

// On loopback, a Host header other than the loopback address is refused:
// a DNS-rebound name cannot read the plan.
func TestHostCheck(t *testing.T) {
	f := newFixture(t)
	_, hs := f.server(t, func(c *serve.Config) { c.Hosts = []string{"127.0.0.1:7420", "localhost:7420"} })
	for host, want := range map[string]int{"127.0.0.1:7420": 200, "LOCALHOST:7420": 200, "evil.example:7420": 421,
		"127.0.0.1:9999": 421, "evil.example": 421} {
		resp, _ := get(t, hs.URL+"/api/plan", "Host", host)
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

func TestLogsTraversal(t *testing.T) {
	f := newFixture(t)
	_, hs := f.server(t, nil)
	secret := filepath.Join(f.dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	sdir := filepath.Join(f.logDir, session)
	if err := os.Symlink(secret, filepath.Join(sdir, "link.ndjson")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.dir, filepath.Join(f.logDir, "session-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(sdir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A symlink that stays inside is refused too: no link is followed
	// (ARCHITECTURE.md §7), so none swapped in during a request can lead out.
	if err := os.Symlink("w1-iter-1.ndjson", filepath.Join(sdir, "inside.ndjson")); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, hs.URL+"/logs/"+session+"/w1-iter-1.ndjson"); resp.StatusCode != 200 || !strings.Contains(body, "system") {
		t.Errorf("a raw stream: %d %q", resp.StatusCode, body)
	}
	for _, p := range []string{
		"/logs/" + session + "/../../secret.txt",
		"/logs/" + session + "/%2e%2e/%2e%2e/secret.txt",
		"/logs/%2e%2e/secret.txt",
		"/logs/" + session + "%2f..%2f..%2fsecret.txt",
		"/logs/..%2f..%2fsecret.txt/x",
		"/logs/" + session + "/..%5c..%5csecret.txt",
		"/logs/" + session + `/..\..\secret.txt`,
		"/logs/" + session + "/w1-iter-1.ndjson%00.txt",
		"/logs/" + session + "/link.ndjson",
		"/logs/" + session + "/inside.ndjson",
		"/logs/session-out/secret.txt",
		"/logs/" + session + "/sub",
		"/logs/" + session,
		"/logs/" + session + "/",
		"/logs/",
		"/logs/" + session + "/w1-iter-1.ndjson/x",
		"/logs/%2f" + strings.TrimPrefix(secret, "/"),
		"/logs/" + session + "/.hidden",
		"/logs/" + session + "/nope.ndjson",
	} {
		resp, body := get(t, hs.URL+p)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "secret") {
			t.Errorf("GET %s: %d %q, want 404", p, resp.StatusCode, body)
		}
	}
}

// sse reads an event stream and sends its events on a channel.
func sse(t *testing.T, url string) <-chan [2]string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	ch := make(chan [2]string, 100)
	ready := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var name, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == ": connected":
				close(ready)
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "" && name != "":
				ch <- [2]string{name, data}
				name, data = "", ""
			}
		}
		close(ch)
	}()
	<-ready
	return ch
}

// waitEvent waits for an event named name, up to a generous bound (a
// loaded CI machine), and returns its data and how long it took.
func waitEvent(t *testing.T, ch <-chan [2]string, name string) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended before a %s event", name)
			}
			if ev[0] == name {
				return ev[1], time.Since(start)
			}
		case <-timeout:
			t.Fatalf("no %s event within 10 s", name)
		}
	}
}

// A change made through another Store handle (another process) reaches
// the stream as a `plan` event; a receipt as `receipts`; an event log
// line as `run`.
func TestEventsStream(t *testing.T) {
	f := newFixture(t)
	_, hs := f.server(t, nil)
	ch := sse(t, hs.URL+"/api/events")
	var before plan
	getJSON(t, hs.URL+"/api/plan", &before)

	claim(t, f.store, "docs", "user-alice")
	data, took := waitEvent(t, ch, "plan")
	var v struct{ Version string }
	if err := json.Unmarshal([]byte(data), &v); err != nil || v.Version == "" || v.Version == before.Version {
		t.Errorf("plan event %q, want a new version (was %s)", data, before.Version)
	}
	var after plan
	getJSON(t, hs.URL+"/api/plan", &after)
	if after.Version != v.Version {
		t.Errorf("/api/plan version %s, the event said %s", after.Version, v.Version)
	}
	t.Logf("store change → plan event: %v", took)

	if err := f.store.RecordReceipt(t.Context(), loop.Receipt{Session: session, Iteration: 2, Mode: "build", TaskID: "api", CostUSD: 1}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ch, "receipts")

	f.events.Observe(loop.Note{Kind: loop.NoteAgentEvent, At: time.Now(), Session: session, Worker: "w1", Iteration: 2,
		AgentEvent: loop.Event{Kind: loop.EventText, Text: "All tests pass."}})
	data, took = waitEvent(t, ch, "run")
	var w struct {
		Worker string
		Events []struct{ Kind, Text string }
	}
	if err := json.Unmarshal([]byte(data), &w); err != nil {
		t.Fatal(err)
	}
	if w.Worker != "w1" || len(w.Events) != 2 || w.Events[1].Text != "All tests pass." {
		t.Errorf("run event = %+v", w)
	}
	t.Logf("event log line → run event: %v", took)
}

// Nothing watches without a client; the watcher stops after the last one
// leaves, and Close ends open streams.
func TestEventsStreamClose(t *testing.T) {
	f := newFixture(t)
	s, hs := f.server(t, nil)
	ch := sse(t, hs.URL+"/api/events")
	s.Close()
	for range ch {
	}
	resp, _ := get(t, hs.URL+"/api/events")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a stream after Close: %d", resp.StatusCode)
	}
}
