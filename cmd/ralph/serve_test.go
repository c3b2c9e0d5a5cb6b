package main

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// served is a running `ralph serve`.
type served struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	errc chan error
}

// startServe starts `ralph serve args…` in the project and waits for the
// line with its URL. The process is stopped (SIGTERM, exit 0 expected)
// when the test ends, unless the test stopped it.
func (e *e2e) startServe(args ...string) *served {
	e.t.Helper()
	cmd := exec.Command(e.bin, append([]string{"serve"}, args...)...)
	cmd.Dir, cmd.Env = e.dir, e.env
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	s := &served{t: e.t, cmd: cmd, errc: make(chan error, 1)}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, out)
		s.errc <- cmd.Wait()
	}()
	select {
	case l, ok := <-line:
		u, found := strings.CutPrefix(l, "ralph serve: ")
		if !ok || !found {
			cmd.Process.Kill()
			e.t.Fatalf("ralph serve printed %q; stderr: %s", l, stderr.String())
		}
		s.url = u
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		e.t.Fatalf("ralph serve printed no URL within 30 s; stderr: %s", stderr.String())
	}
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			s.stop()
		}
	})
	return s
}

// stop sends SIGTERM and checks that ralph serve exits 0, promptly.
func (s *served) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.errc:
		if err != nil {
			s.t.Errorf("ralph serve after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		s.t.Errorf("ralph serve did not stop within 15 s of SIGTERM")
	}
}

func (s *served) get(path string, hdr ...string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.t.Context(), http.MethodGet, s.url+strings.TrimPrefix(path, "/"), nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitPlanEvent waits for a `plan` event among the stream's events, at
// most 10 s (a loaded machine) after what (a command) changed the plan.
func waitPlanEvent(t *testing.T, ev <-chan string, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case name := <-ev:
			if name == "plan" {
				return
			}
		case <-deadline:
			t.Fatalf("no plan event within 10 s of %s", what)
		}
	}
}

// events opens the event stream and returns the names of its events as
// they come.
func (s *served) events() <-chan string {
	s.t.Helper()
	ctx, cancel := context.WithCancel(s.t.Context())
	s.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	ch := make(chan string, 64)
	connected := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == ": connected" {
				close(connected)
			}
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				ch <- name
			}
		}
	}()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		s.t.Fatal("the event stream did not open within 10 s")
	}
	return ch
}

func TestE2EServe(t *testing.T) {
	e := newProject(t, nil)
	e.ok("task", "add", "--id", "a", "Design the schema")
	e.ok("task", "add", "--id", "b", "--blocked-by", "a", "Write the API")
	s := e.startServe("--addr", "127.0.0.1:0")
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") || !strings.HasSuffix(s.url, "/") {
		t.Errorf("URL %q", s.url)
	}
	code, body := s.get("/api/plan")
	var plan struct {
		Counts map[string]int
		Tasks  []struct {
			ID    string
			Ready bool
		}
	}
	if code != 200 || json.Unmarshal([]byte(body), &plan) != nil {
		t.Fatalf("/api/plan: %d %s", code, body)
	}
	if plan.Counts["total"] != 2 || len(plan.Tasks) != 2 || !plan.Tasks[0].Ready || plan.Tasks[1].Ready {
		t.Errorf("plan = %+v", plan)
	}
	if code, body := s.get("/"); code != 200 || !strings.Contains(body, `id="graph"`) {
		t.Errorf("/: %d", code)
	}

	ev := s.events()
	e.ok("task", "claim", "a")
	e.ok("task", "done", "a")
	waitPlanEvent(t, ev, "'ralph task done'")
	code, body = s.get("/api/plan")
	if code != 200 || !strings.Contains(body, `"done":1`) {
		t.Errorf("/api/plan after done: %d %s", code, body)
	}
	s.stop()
}

// TestE2EServeOtherLoopback: a loopback address other than 127.0.0.1
// serves the URL it prints (its Host is accepted), and still needs no
// token.
func TestE2EServeOtherLoopback(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("127.0.0.2 is loopback on Linux only")
	}
	e := newProject(t, nil)
	s := e.startServe("--addr", "127.0.0.2:0")
	if !strings.HasPrefix(s.url, "http://127.0.0.2:") {
		t.Fatalf("URL %q", s.url)
	}
	if code, _ := s.get("/api/plan"); code != 200 {
		t.Errorf("GET the printed URL: %d, want 200", code)
	}
	s.stop()
}

func TestE2EServeToken(t *testing.T) {
	e := newProject(t, nil)
	r := e.run("serve", "--addr", "0.0.0.0:0")
	if r.code != 1 || !strings.Contains(r.stderr, "not a loopback address") || r.stdout != "" {
		t.Errorf("serve on 0.0.0.0 without a token: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	const token = "e2e-token-0123456789"
	e.env = append(e.env, "RALPH_SERVE_TOKEN="+token)
	s := e.startServe("--addr", "0.0.0.0:0")
	if code, body := s.get("/api/plan"); code != http.StatusUnauthorized || strings.Contains(body, token) {
		t.Errorf("no token: %d %q", code, body)
	}
	if code, _ := s.get("/api/plan", "Authorization", "Bearer "+token); code != 200 {
		t.Errorf("with the token: %d", code)
	}
	s.stop()
}

func TestE2EServePortInUse(t *testing.T) {
	e := newProject(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	r := e.run("serve", "--addr", addr)
	if r.code != 1 || !strings.Contains(r.stderr, addr) {
		t.Errorf("port in use: exit %d, stderr %q; want 1 naming %s", r.code, r.stderr, addr)
	}
	r = e.run("--dir", t.TempDir(), "serve", "--addr", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.stderr, "ralph init") {
		t.Errorf("no project: exit %d, stderr %q", r.code, r.stderr)
	}
}

// cpuTicks is the process's user+system CPU time in clock ticks
// (/proc/PID/stat fields 14 and 15).
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return utime + stime
}

// An idle ralph serve, with a page's event stream open and nothing
// changing, uses no measurable CPU: no polling.
func TestE2EServeIdleCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	e := newProject(t, nil)
	for i := range 50 {
		e.ok("task", "add", "--id", "t"+strconv.Itoa(i), "Task "+strconv.Itoa(i))
	}
	s := e.startServe("--addr", "127.0.0.1:0")
	s.events()
	if code, _ := s.get("/api/plan"); code != 200 {
		t.Fatal(code)
	}
	time.Sleep(500 * time.Millisecond) // let the start settle
	pid := s.cmd.Process.Pid
	before := cpuTicks(t, pid)
	time.Sleep(3 * time.Second)
	used := cpuTicks(t, pid) - before
	t.Logf("ralph serve, idle with one event stream open: %d clock ticks of CPU in 3 s", used)
	if used > 3 {
		t.Errorf("idle ralph serve used %d clock ticks in 3 s, want at most 3", used)
	}
	s.stop()
}

// TestE2EServeOnPostgres: `ralph serve` on a plan kept on PostgreSQL. It
// learns of another process's change from the plan's notifications (not
// from a file), and idle, with a page's event stream open, it costs no
// CPU: the watcher blocks on the notification connection.
func TestE2EServeOnPostgres(t *testing.T) {
	e := newProject(t, nil, "--db", pgtest.URL(t), "--plan", "serve")
	e.ok("task", "add", "--id", "a", "Design the schema")
	e.ok("task", "add", "--id", "b", "--blocked-by", "a", "Write the API")
	s := e.startServe("--addr", "127.0.0.1:0")
	ev := s.events()
	if code, body := s.get("/api/plan"); code != 200 || !strings.Contains(body, `"total":2`) {
		t.Fatalf("/api/plan: %d %s", code, body)
	}
	if runtime.GOOS == "linux" {
		time.Sleep(500 * time.Millisecond) // let the start settle
		before := cpuTicks(t, s.cmd.Process.Pid)
		time.Sleep(3 * time.Second)
		used := cpuTicks(t, s.cmd.Process.Pid) - before
		t.Logf("ralph serve on PostgreSQL, idle with one event stream open: %d clock ticks of CPU in 3 s", used)
		if used > 3 {
			t.Errorf("idle ralph serve used %d clock ticks in 3 s, want at most 3", used)
		}
	}
	start := time.Now()
	e.ok("task", "claim", "a")
	waitPlanEvent(t, ev, "'ralph task claim' on PostgreSQL")
	t.Logf("'ralph task claim' on PostgreSQL → plan event: %v (the command included)", time.Since(start).Round(time.Millisecond))
	if code, body := s.get("/api/plan"); code != 200 || !strings.Contains(body, `"active":1`) {
		t.Errorf("/api/plan after the claim: %d %s", code, body)
	}
	s.stop()
}

// TestServeStoreUnreachable: `ralph serve` of a plan on PostgreSQL whose
// server goes away — refused, or cut off by the network (silent) —
// answers every API request within a second, 503, saying the store is
// unreachable, and answers as before once the server is back.
func TestServeStoreUnreachable(t *testing.T) {
	proxy, url := pgtest.NewProxy(t, pgtest.URL(t))
	e := newProject(t, nil, "--db", url, "--plan", "away")
	e.ok("task", "add", "--id", "a", "Design the schema")
	s := e.startServe("--addr", "127.0.0.1:0")
	if code, body := s.get("/api/plan"); code != 200 || !strings.Contains(body, `"total":1`) {
		t.Fatalf("/api/plan: %d %s", code, body)
	}
	for _, fault := range []struct {
		name  string
		start func()
	}{{"refused", proxy.Down}, {"partitioned", proxy.Partition}} {
		fault.start()
		for _, path := range []string{"/api/plan", "/api/runs", "/api/task/a"} {
			start := time.Now()
			code, body := s.get(path)
			took := time.Since(start)
			if code != 503 || !strings.Contains(body, "the plan's store is unreachable") || took > time.Second {
				t.Errorf("%s, %s: %d after %v: %s; want 503 saying so within 1 s", fault.name, path, code, took.Round(time.Millisecond), body)
			}
		}
		proxy.Heal()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body := s.get("/api/plan")
			if code == 200 && strings.Contains(body, `"total":1`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the %s server came back: %d %s", fault.name, code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	s.stop()
}
