package claude

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/claude/claudetest"
	"github.com/ralph-dev/ralph/loop"
)

func init() {
	extraFakeModes["ralph-parent"] = playRalphParent
}

// The ralph-parent mode's settings: the agent to run (default: this
// binary as the "hang" fake, which ignores SIGTERM and leaves a grandchild
// that does too) and more environment for it (a JSON list).
const (
	envParentAgent = "RALPH_TEST_PARENT_AGENT"
	envParentEnv   = "RALPH_TEST_PARENT_ENV"
)

// playRalphParent plays a ralph that runs an agent with a system prompt
// and reports on stdout the grandchild pid the fake agent reports. The
// test kills it with SIGKILL.
func playRalphParent() int {
	var env []string
	if err := json.Unmarshal([]byte(os.Getenv(envParentEnv)), &env); err != nil {
		env = nil
	}
	path := os.Getenv(envParentAgent)
	if path == "" {
		path = os.Args[0]
		env = append(env, fakeAgentEnv+"=hang", "GORACE=atexit_sleep_ms=0")
	}
	r := &Runner{Path: path, Grace: 500 * time.Millisecond}
	req := loop.RunRequest{
		Prompt:       "do the thing",
		SystemPrompt: "ralph's agent protocol",
		Sandboxed:    true,
		UseAPIKey:    true,
		Env:          append(env, loop.EnvHolder+"="+loop.ThisProcess().String()),
		OnEvent: func(ev loop.Event) {
			if strings.HasPrefix(ev.Text, "grandchild ") {
				fmt.Println(ev.Text)
			}
		},
	}
	_, err := r.Run(context.Background(), req)
	fmt.Fprintln(os.Stderr, "ralph-parent: Run returned:", err)
	return 1
}

// isolateHost gives the test a host identity of its own ($RALPH_HOST_ID,
// inherited by the processes it starts). Sweep judges only holders of its
// own host: the dead holders made here are judged by no other sweep on the
// machine, and the test's sweeps judge no other process.
func isolateHost(t *testing.T) string {
	t.Helper()
	host := fmt.Sprintf("claude-sweep-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Setenv(loop.EnvHostID, host)
	return host
}

// When ralph dies by SIGKILL, its agent dies with it (the parent-death
// signal), and ralph's watchdog stops what the agent left (a grandchild
// that ignores SIGTERM and carries RALPH_HOLDER) and removes the system
// prompt file the dead ralph could not, without another ralph starting:
// the next start's sweep finds nothing left.
func TestKillNineLeavesNoAgent(t *testing.T) {
	host := isolateHost(t)
	t.Setenv("TMPDIR", t.TempDir())
	mark := "RALPH_TEST_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 36)
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), fakeAgentEnv+"=ralph-parent", "GORACE=atexit_sleep_ms=0", mark)
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = parent.Process.Kill()
		_ = parent.Wait()
	})
	parentStart, err := loop.ProcessStart(parent.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	holder := loop.Holder{Host: host, PID: parent.Process.Pid, Start: parentStart}

	// The agent runs once it has reported its grandchild.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	grandchild, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "grandchild ")))
	if err != nil || grandchild == 0 {
		t.Fatalf("ralph-parent said %q, %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	var agent int
	for _, pid := range claudetest.ProcessesWithEnv(mark) {
		if pid != parent.Process.Pid && pid != grandchild {
			agent = pid
		}
	}
	if agent == 0 {
		t.Fatal("no agent process found")
	}
	t.Cleanup(func() { _ = syscall.Kill(agent, syscall.SIGKILL) })
	files, _ := filepath.Glob(systemPromptGlob(holder))
	if len(files) != 1 {
		t.Fatalf("system prompt files named after the ralph: %v, want one", files)
	}

	// kill -9 ralph.
	_ = parent.Process.Kill()
	_ = parent.Wait()
	killed := time.Now()
	for !processGone(agent) && time.Since(killed) < 5*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if !processGone(agent) {
		t.Fatalf("the agent (pid %d) outlived ralph by 5 s", agent)
	}
	t.Logf("the agent was gone %v after ralph's SIGKILL", time.Since(killed))

	// The grandchild left the agent's reach (no parent-death signal for
	// it) but not the watchdog's: SIGKILL after the grace period (500
	// ms), as it ignores SIGTERM.
	for !processGone(grandchild) && time.Since(killed) < 5*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if !processGone(grandchild) {
		t.Fatalf("the grandchild (pid %d) outlived ralph by 5 s", grandchild)
	}
	t.Logf("the grandchild was gone %v after ralph's SIGKILL", time.Since(killed))
	if left, _ := filepath.Glob(systemPromptGlob(holder)); len(left) > 0 {
		t.Errorf("the system prompt file is left: %v", left)
	}
	swept, err := agentproc.Sweep(t.Context(), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(agentproc.Swept{}, swept); diff != "" {
		t.Errorf("Sweep, after the watchdog (-want +got):\n%s", diff)
	}
}

// The real Claude Code dies with a ralph killed by SIGKILL too: nothing in
// it undoes the parent-death signal.
func TestE2EKillNineLeavesNoAgent(t *testing.T) {
	path := claudetest.Binary(t)
	api := claudetest.NewAPI(t, func(claudetest.Request) claudetest.Reply {
		return claudetest.Reply{Blocks: []claudetest.Block{{Text: "Partial answer"}, {Text: "never sent"}}, Stop: "end_turn", StallAt: 2}
	})
	host := isolateHost(t)
	t.Setenv("TMPDIR", t.TempDir())
	agentEnv, _ := json.Marshal(append(api.Env(t.TempDir()), claudetest.IsSandbox)) // a work session, as root
	parent := exec.Command(os.Args[0])
	parent.Dir = t.TempDir()
	parent.Env = append(os.Environ(), fakeAgentEnv+"=ralph-parent", "GORACE=atexit_sleep_ms=0",
		envParentAgent+"="+path, envParentEnv+"="+string(agentEnv))
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		for _, pid := range claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL=" + api.URL) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	parentStart, err := loop.ProcessStart(parent.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	holder := loop.Holder{Host: host, PID: parent.Process.Pid, Start: parentStart}
	select {
	case <-api.Stalled: // the CLI is mid-request
	case <-time.After(30 * time.Second):
		t.Fatal("the CLI never called the API")
	}
	agents := claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL=" + api.URL)
	if len(agents) == 0 {
		t.Fatal("no agent process found")
	}

	_ = parent.Process.Kill()
	_ = parent.Wait()
	killed := time.Now()
	for len(claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL="+api.URL)) > 0 && time.Since(killed) < 5*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if left := claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL=" + api.URL); len(left) > 0 {
		t.Fatalf("processes %v (agent: %v) outlived ralph by 5 s", left, agents)
	}
	t.Logf("the CLI was gone %v after ralph's SIGKILL", time.Since(killed))

	// ralph's watchdog removes the system prompt file: nothing is left
	// for the next start's sweep.
	for {
		files, _ := filepath.Glob(systemPromptGlob(holder))
		if len(files) == 0 {
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("the system prompt file is left 5 s after ralph's SIGKILL: %v", files)
		}
		time.Sleep(10 * time.Millisecond)
	}
	swept, err := agentproc.Sweep(t.Context(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(agentproc.Swept{}, swept); diff != "" {
		t.Errorf("Sweep, after the watchdog (-want +got):\n%s", diff)
	}
}

// systemPromptGlob matches the system prompt files of the process holder
// (agentproc.TempFile names).
func systemPromptGlob(holder loop.Holder) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("ralph-system-prompt-%d-%d-*.md", holder.PID, holder.Start))
}
