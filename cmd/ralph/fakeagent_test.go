package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary plays two more parts, chosen by environment variables:
// the scripted fake agent (envFakeAgent names its script), and ralph itself
// (envAsRalph), which is what the fake agent runs when it calls $RALPH_BIN:
// in these tests os.Executable, hence RALPH_BIN, is the test binary.
const (
	envFakeAgent = "RALPH_TEST_FAKE_AGENT"
	envAsRalph   = "RALPH_TEST_AS_RALPH"
)

func TestMain(m *testing.M) {
	if os.Getenv(envAsRalph) == "1" {
		os.Exit(run(context.Background(), os.Args, os.Stdout, os.Stderr))
	}
	if script := os.Getenv(envFakeAgent); script != "" {
		os.Exit(fakeAgent(script, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}

// cleanups run after every test of the package (TestMain cannot use
// t.Cleanup): shared builds of the ralph binary.
var cleanups []func()

// agentScript drives the fake agent: its n-th session (counting every
// session of the test, verifier sessions included) plays Steps[n-1], and
// the last step again once the steps run out.
type agentScript struct {
	Steps []agentStep `json:"steps"`
}

// agentStep is one scripted session. "{task}" in Text and Sh stands for
// $RALPH_TASK_ID, and "{sh}" in Text for the output of Sh. A sandboxed
// fake agent cannot record its call beside its script: it then plays the
// step of its iteration ($RALPH_ITERATION), and Sh sees FAKE_VERIFIER=1 in
// a verifier's session.
type agentStep struct {
	// Sh runs first, with sh -c in the project; $RALPH_BIN in it is ralph.
	// Its output is the session's tool result.
	Sh string `json:"sh,omitempty"`
	// Text is the final result text (sigils and all).
	Text string `json:"text,omitempty"`
	// VerifierText, when set, is the final text of a verifier's session
	// instead of Text: a sandboxed fake agent plays its iteration's step
	// in the worker's and the verifier's session alike.
	VerifierText string `json:"verifier_text,omitempty"`
	// Crash ends the session with exit 3 and no result line.
	Crash bool `json:"crash,omitempty"`
	// Hang blocks until the agent is killed.
	Hang bool `json:"hang,omitempty"`
	// IsError marks the result line is_error.
	IsError bool `json:"is_error,omitempty"`
	// Cost is the session's total_cost_usd.
	Cost float64 `json:"cost,omitempty"`
	// UsageLimit, when set, is the reset time (Unix seconds) of a rejected
	// usage limit: a rate_limit_event and an error result.
	UsageLimit int64 `json:"usage_limit,omitempty"`
}

// agentCall is what the fake agent records of each session, one JSON line
// in <script>.calls.
type agentCall struct {
	Args   []string          `json:"args"`
	Env    map[string]string `json:"env"`
	Prompt string            `json:"prompt"`
	// System is the system prompt file's content (--append-system-prompt-file
	// or --system-prompt-file), "" when there was none.
	System string `json:"system"`
}

// fakeAgent is the scripted agent: it records the call, then speaks Claude
// Code's stream-json as its step says.
func fakeAgent(script string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "fake agent:", err)
		return 2
	}
	b, err := os.ReadFile(script)
	if err != nil {
		return fail(err)
	}
	var s agentScript
	if err := json.Unmarshal(b, &s); err != nil {
		return fail(err)
	}
	prompt, err := io.ReadAll(stdin)
	if err != nil {
		return fail(err)
	}
	n, err := recordCall(script, args, prompt)
	if err != nil {
		return fail(err)
	}
	if len(s.Steps) == 0 {
		return fail(fmt.Errorf("%s: no steps", script))
	}
	return playStep(s.Steps[min(n, len(s.Steps)-1)], n, args, stdout, stderr)
}

// recordCall appends the session's call to <script>.calls and returns how
// many sessions came before it. A sandboxed agent cannot write beside its
// script: nothing is recorded, and the session plays the step of its
// iteration.
func recordCall(script string, args []string, prompt []byte) (int, error) {
	calls := script + ".calls"
	prev, _ := os.ReadFile(calls)
	n := strings.Count(string(prev), "\n")
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && (strings.HasPrefix(k, "RALPH_") && !strings.HasPrefix(k, "RALPH_TEST_") || k == "ANTHROPIC_API_KEY" || k == "CLAUDECODE") {
			env[k] = v
		}
	}
	var system []byte
	for i, a := range args {
		if (a == "--append-system-prompt-file" || a == "--system-prompt-file") && i+1 < len(args) {
			var err error
			if system, err = os.ReadFile(args[i+1]); err != nil {
				return 0, err
			}
		}
	}
	line, _ := json.Marshal(agentCall{Args: args, Env: env, Prompt: string(prompt), System: string(system)})
	f, err := os.OpenFile(calls, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if errors.Is(err, syscall.EROFS) {
		if it, err := strconv.Atoi(os.Getenv("RALPH_ITERATION")); err == nil && it > 0 {
			n = it - 1
		}
		return n, nil
	}
	if err != nil {
		return 0, err
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// playStep speaks session n's step as Claude Code's stream-json and
// returns the agent's exit code.
func playStep(step agentStep, n int, args []string, stdout, stderr io.Writer) int {
	task := os.Getenv("RALPH_TASK_ID")
	expand := func(t string) string { return strings.ReplaceAll(t, "{task}", task) }

	w := bufio.NewWriter(stdout)
	defer w.Flush()
	emit := func(v any) {
		b, _ := json.Marshal(v)
		w.Write(append(b, '\n'))
		w.Flush()
	}
	session := fmt.Sprintf("fake-%d", n+1)
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": modelArg(args), "cwd": os.Getenv("RALPH_DIR")})
	if step.Hang {
		time.Sleep(time.Hour)
		return 0
	}
	var out []byte
	if step.Sh != "" {
		cmd := exec.Command("sh", "-c", expand(step.Sh))
		cmd.Env = append(withoutEnv(os.Environ(), envFakeAgent), envAsRalph+"=1")
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--tools=") }) {
			cmd.Env = append(cmd.Env, "FAKE_VERIFIER=1") // the payload can tell a verifier session
		}
		var err error
		out, err = cmd.CombinedOutput()
		emit(assistant(session, map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": expand(step.Sh)}}))
		emit(map[string]any{"type": "user", "session_id": session, "message": map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": string(out), "is_error": err != nil}}}})
	}
	if step.Crash {
		emit(assistant(session, map[string]any{"type": "text", "text": "about to fall over"}))
		fmt.Fprintln(stderr, "fake agent: crashing as scripted")
		return 3
	}
	if step.UsageLimit != 0 {
		emit(map[string]any{"type": "rate_limit_event", "session_id": session,
			"rate_limit_info": map[string]any{"status": "rejected", "resetsAt": step.UsageLimit, "rateLimitType": "five_hour"}})
		emit(map[string]any{"type": "result", "subtype": "success", "is_error": true, "session_id": session,
			"api_error_status": 429, "api_error": "usage_limit_reached", "result": "You've hit your 5-hour limit",
			"num_turns": 1, "duration_ms": 5, "total_cost_usd": 0})
		return 1
	}
	final := step.Text
	if step.VerifierText != "" && slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--tools=") }) {
		final = step.VerifierText
	}
	text := strings.ReplaceAll(expand(final), "{sh}", string(out))
	emit(assistant(session, map[string]any{"type": "text", "text": text}))
	emit(map[string]any{"type": "result", "subtype": "success", "is_error": step.IsError, "session_id": session,
		"result": text, "num_turns": 2, "duration_ms": 20, "total_cost_usd": step.Cost,
		"usage": map[string]any{"input_tokens": 1000, "output_tokens": 50, "cache_read_input_tokens": 10, "cache_creation_input_tokens": 5}})
	return 0
}

func assistant(session string, block map[string]any) map[string]any {
	return map[string]any{"type": "assistant", "session_id": session,
		"message": map[string]any{"role": "assistant", "model": "fake", "content": []any{block}}}
}

// modelArg is the value of --model in the agent's arguments.
func modelArg(args []string) string {
	for i, a := range args {
		if a == "--model" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// fakeAgentPath writes the script into a fresh directory and returns an
// executable that runs the test binary as the fake agent with that script,
// and the path of the script (its calls go to <script>.calls).
func fakeAgentPath(t *testing.T, steps ...agentStep) (agent, script string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script = filepath.Join(dir, "script.json")
	b, err := json.Marshal(agentScript{Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, b, 0o644); err != nil {
		t.Fatal(err)
	}
	agent = filepath.Join(dir, "claude")
	// GORACE: a test binary built with -race sleeps a second at exit
	// unless told not to.
	wrapper := fmt.Sprintf("#!/bin/sh\nGORACE=atexit_sleep_ms=0 %s=%s exec %s \"$@\"\n", envFakeAgent, shQuote(script), shQuote(self))
	if err := os.WriteFile(agent, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return agent, script
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// agentCalls reads the sessions the fake agent recorded.
func agentCalls(t *testing.T, script string) []agentCall {
	t.Helper()
	b, err := os.ReadFile(script + ".calls")
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var calls []agentCall
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var c agentCall
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	return calls
}
