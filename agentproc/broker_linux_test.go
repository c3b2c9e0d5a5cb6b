package agentproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/broker"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
	"github.com/ralph-dev/ralph/sandbox"
)

func init() {
	// The agent that claims through its broker: it prints the withheld
	// variables it sees, its RALPH_SOCKET, and the task it claimed.
	fakeModes["broker-client"] = func() int {
		for _, k := range []string{"RALPH_DB", "PGPASSWORD", "PGPASSFILE", "GH_TOKEN", "GITHUB_TOKEN", "RALPH_SERVE_TOKEN"} {
			if v, ok := os.LookupEnv(k); ok {
				fmt.Printf("leaked %s=%s\n", k, v)
			}
		}
		sock := os.Getenv(broker.EnvSocket)
		fmt.Printf("socket %s\n", sock)
		if sock == "" {
			return 0
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := broker.Dial(ctx, sock)
		if err != nil {
			fmt.Println("dial:", err)
			return 1
		}
		defer c.Close()
		t, err := c.Claim(ctx, loop.ClaimParams{Agent: os.Getenv("RALPH_AGENT_ID")})
		if err != nil {
			fmt.Println("claim:", err)
			return 1
		}
		fmt.Printf("claimed %s\n", t.ID)
		return 0
	}
}

// sandboxOrSkip finds bubblewrap, skipping the test without it (failing
// under CI=true).
func sandboxOrSkip(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.Find()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("no sandbox here: %v", err)
	}
	return sb
}

// brokerSpec runs the test binary as the broker-client agent, with secrets
// and a stale RALPH_SOCKET in its environment.
func brokerSpec(t *testing.T, plan *loop.PlanAccess, out *strings.Builder) Spec {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), fakeEnv+"=broker-client", "RALPH_AGENT_ID=agent-a", "GORACE=atexit_sleep_ms=0",
		"RALPH_DB=postgres://ralph:hunter2@db.example/plan", "PGPASSWORD=hunter2", "PGPASSFILE=/home/u/.pgpass",
		"GH_TOKEN=ghp_x", "GITHUB_TOKEN=ghp_y", "RALPH_SERVE_TOKEN=tok", broker.EnvSocket+"=/stale/socket")
	return Spec{
		Name: "broker-client", Path: self, Dir: t.TempDir(), Env: env, Plan: plan, Grace: time.Second,
		Decode: func(r io.Reader, _ func(loop.Event)) error {
			b, err := io.ReadAll(r)
			out.Write(b)
			return err
		},
	}
}

// TestRunSandboxBroker: a sandboxed agent gets a socket of its own, claims
// through it as itself under its loop's holder, and sees none of the
// withheld variables; the socket is gone once Run returns.
func TestRunSandboxBroker(t *testing.T) {
	sb := sandboxOrSkip(t)
	ms := looptest.NewMemStore(nil)
	if err := ms.Add(loop.Task{ID: "t-1", Title: "First", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	holder := loop.ThisProcess()
	plan := &loop.PlanAccess{Store: ms, Agent: "agent-a", Holder: holder, Mode: loop.ModeBuild, ClaimMode: loop.ClaimAgent}
	var out strings.Builder
	s := brokerSpec(t, plan, &out)
	box, err := sb.Boundary(sandbox.BoundaryParams{Root: s.Dir, Env: s.Env})
	if err != nil {
		t.Fatal(err)
	}
	s.Sandbox = box
	exit, err := Run(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if exit.ExitCode != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "socket /") || lines[1] != "claimed t-1" {
		t.Fatalf("exit %d, output:\n%s\nstderr: %s", exit.ExitCode, out.String(), exit.Stderr)
	}
	sock := strings.TrimPrefix(lines[0], "socket ")
	if sock == "/stale/socket" {
		t.Error("the agent got the RALPH_SOCKET of its environment, not its own")
	}
	if _, err := os.Lstat(filepath.Dir(sock)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket's directory outlived the session: %v", err)
	}
	// Were ralph killed (kill -9), nothing would remove the socket's
	// directory but Sweep: it must lie in the session's scratch, a
	// directory Sweep knows as this process's and removes whole.
	scratch := filepath.Dir(filepath.Dir(sock))
	pid, _, _, ok := tempWriter(filepath.Base(scratch))
	if !ok || pid != os.Getpid() || filepath.Dir(scratch) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(filepath.Base(scratch), tempPrefix+"sandbox-") {
		t.Errorf("the socket %s is not in a scratch directory Sweep removes (%s in %s)", sock, scratch, os.TempDir())
	}
	task, err := ms.Get(t.Context(), "t-1")
	if err != nil {
		t.Fatal(err)
	}
	got := []any{task.Status, task.ClaimedBy, task.Holder, task.ClaimMode}
	want := []any{loop.StatusInProgress, "agent-a", holder, loop.ClaimAgent}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the claim (-want +got):\n%s", diff)
	}
}

// TestRunUnsandboxedNoBroker: an agent outside a sandbox gets no broker,
// no RALPH_SOCKET (not even an inherited one), and its environment as it
// is.
func TestRunUnsandboxedNoBroker(t *testing.T) {
	ms := looptest.NewMemStore(nil)
	plan := &loop.PlanAccess{Store: ms, Agent: "agent-a", Mode: loop.ModeBuild, ClaimMode: loop.ClaimAgent}
	var out strings.Builder
	exit, err := Run(t.Context(), brokerSpec(t, plan, &out))
	if err != nil {
		t.Fatal(err)
	}
	want := "leaked RALPH_DB=postgres://ralph:hunter2@db.example/plan\nleaked PGPASSWORD=hunter2\nleaked PGPASSFILE=/home/u/.pgpass\n" +
		"leaked GH_TOKEN=ghp_x\nleaked GITHUB_TOKEN=ghp_y\nleaked RALPH_SERVE_TOKEN=tok\nsocket \n"
	if exit.ExitCode != 0 || out.String() != want {
		t.Errorf("exit %d, output:\n%s\nwant:\n%s", exit.ExitCode, out.String(), want)
	}
}

func TestWithheld(t *testing.T) {
	for k, want := range map[string]bool{
		"RALPH_DB": true, "PGPASSWORD": true, "PGPASSFILE": true, "PGSERVICEFILE": true, "PGHOST": true,
		"GH_TOKEN": true, "GITHUB_TOKEN": true, "RALPH_SERVE_TOKEN": true,
		"GH_ENTERPRISE_TOKEN": true, "GITHUB_ENTERPRISE_TOKEN": true,
		"RALPH_DIR": false, "RALPH_PLAN": false, "PATH": false, "HOME": false, "ANTHROPIC_API_KEY": false,
	} {
		if got := Withheld(k); got != want {
			t.Errorf("Withheld(%s) = %v, want %v", k, got, want)
		}
	}
}

// TestAgentEnvOwnKeys: a sandboxed agent keeps its own provider's key
// (OwnKeys) and is given no other provider's; unsandboxed, or with no
// OwnKeys (an agent of any provider), the keys stay.
func TestAgentEnvOwnKeys(t *testing.T) {
	box := &sandbox.Boundary{}
	env := []string{"ANTHROPIC_API_KEY=a", "ANTHROPIC_AUTH_TOKEN=b", "OPENAI_API_KEY=o", "CODEX_API_KEY=c",
		"GEMINI_API_KEY=g", "GOOGLE_API_KEY=k", "PATH=/bin"}
	for _, c := range []struct {
		name string
		spec Spec
		want []string
	}{
		{"claude, sandboxed", Spec{Env: env, Sandbox: box, OwnKeys: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"}},
			[]string{"ANTHROPIC_API_KEY=a", "ANTHROPIC_AUTH_TOKEN=b", "PATH=/bin"}},
		{"gemini, sandboxed", Spec{Env: env, Sandbox: box, OwnKeys: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}},
			[]string{"GEMINI_API_KEY=g", "GOOGLE_API_KEY=k", "PATH=/bin"}},
		{"any provider, sandboxed", Spec{Env: env, Sandbox: box}, env},
		{"claude, on the host", Spec{Env: env, OwnKeys: []string{"ANTHROPIC_API_KEY"}}, env},
	} {
		if diff := cmp.Diff(c.want, agentEnv(c.spec, "")); diff != "" {
			t.Errorf("%s: environment (-want +got):\n%s", c.name, diff)
		}
	}
}
