package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// realClaude returns the pinned Claude Code binary that .ci/run installs:
// $RALPH_TEST_CLAUDE, else <module root>/.cache/claude/node_modules/.bin/claude.
// Missing, it fails the test in CI and skips it elsewhere, saying how to
// install it (the convention of package claude's end-to-end tests).
func realClaude(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RALPH_TEST_CLAUDE"); p != "" {
		return p
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, ".cache", "claude", "node_modules", ".bin", "claude")
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("Claude Code not found at %s (or $RALPH_TEST_CLAUDE); .ci/run installs it", p)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// fakeMessagesAPI answers every POST /v1/messages with a one-word streamed
// reply and keeps the text of every user message it was sent.
type fakeMessagesAPI struct {
	url   string
	mu    sync.Mutex
	texts []string
}

func newFakeMessagesAPI(t *testing.T) *fakeMessagesAPI {
	t.Helper()
	f := &fakeMessagesAPI{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	f.url = "http://" + ln.Addr().String()
	return f
}

func (f *fakeMessagesAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		w.WriteHeader(http.StatusOK)
		return
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	for _, m := range req.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			f.texts = append(f.texts, s)
			continue
		}
		var blocks []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			f.texts = append(f.texts, b.Text)
		}
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data) }
	send("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"`+req.Model+
		`","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`)
	send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	send("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`)
	send("content_block_stop", `{"type":"content_block_stop","index":0}`)
	send("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}`)
	send("message_stop", `{"type":"message_stop"}`)
}

// TestSlashCommandWithRealClaude checks the integration init installs
// against the real Claude Code: in a project after `ralph init`, the prompt
// "/ralph-build <peek markdown>" (what peek mode sends) reaches the model as
// ralph-build.md with the whole multi-line peek in place of $ARGUMENTS.
func TestSlashCommandWithRealClaude(t *testing.T) {
	bin := realClaude(t)
	h := initHarness(t)
	h.add("Set up the schema", "-d", "DESCRIPTION-MARKER")
	peek := h.ok("task", "peek")

	api := newFakeMessagesAPI(t)
	home := t.TempDir()
	ctx := t.Context()
	cmd := exec.CommandContext(ctx, bin, "-p", "--verbose", "--output-format", "stream-json",
		"--no-session-persistence", "--model", "sonnet")
	cmd.Dir = h.dir
	cmd.Stdin = strings.NewReader("/ralph-build " + peek)
	cmd.Env = append(os.Environ(),
		"ANTHROPIC_BASE_URL="+api.url,
		"ANTHROPIC_API_KEY=sk-ant-test-not-a-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"HOME="+home, "TMPDIR="+home,
	)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"ralph-build"`) {
		t.Errorf("the init event does not list the ralph-build command:\n%.2000s", out)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	for _, text := range api.texts {
		if strings.Contains(text, "You are one iteration of a ralph build loop") {
			if !strings.Contains(text, strings.TrimSpace(peek)) {
				t.Errorf("the expanded command lacks the peek:\n%s", text)
			}
			if strings.Contains(text, "$ARGUMENTS") {
				t.Errorf("$ARGUMENTS was not replaced:\n%s", text)
			}
			return
		}
	}
	t.Errorf("no request carried the expanded /ralph-build command; user texts sent:\n%q", api.texts)
}
