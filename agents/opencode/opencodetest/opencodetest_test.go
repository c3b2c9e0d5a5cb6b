package opencodetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// post sends one chat completion request and returns the data of every
// server-sent event.
func post(t *testing.T, a *API, body string) (status int, events []string) {
	t.Helper()
	resp, err := http.Post(a.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, []string{string(b)}
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	return resp.StatusCode, events
}

func TestAPIScript(t *testing.T) {
	a := NewAPI(t, func(r Request) Reply {
		switch r.ToolResults() {
		case 0:
			return Shell("echo hi > out.txt")
		case 1:
			return Text("Done, after " + r.LastToolResult())
		}
		return Status(500, `{"error":{"message":"boom"}}`)
	})
	tools := `"tools":[{"type":"function","function":{"name":"bash"}}]`

	_, ev := post(t, a, `{"model":"fake-model","stream":true,`+tools+`,"messages":[{"role":"user","content":"go"}]}`)
	if got := ev[len(ev)-1]; got != "[DONE]" {
		t.Errorf("last event %q, want [DONE]", got)
	}
	var call struct {
		Choices []struct {
			Delta struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.Unmarshal([]byte(ev[1]), &call); err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Choices[0].Delta.ToolCalls[0].Function.Arguments), &args); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"command": "echo hi > out.txt", "description": "Run a command"}, args); diff != "" {
		t.Errorf("tool call arguments (-want +got):\n%s", diff)
	}
	if !strings.Contains(ev[len(ev)-2], `"finish_reason":"tool_calls"`) || !strings.Contains(ev[len(ev)-2], `"cached_tokens":200`) {
		t.Errorf("last chunk %s: want finish_reason tool_calls and the usage", ev[len(ev)-2])
	}

	_, ev = post(t, a, `{"stream":true,`+tools+`,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},{"role":"tool","tool_call_id":"call_1","content":" ok "}]}`)
	if !strings.Contains(ev[1], `"content":"Done, after ok"`) {
		t.Errorf("text chunk %s, want the scripted text", ev[1])
	}

	status, ev := post(t, a, `{"stream":true,`+tools+`,"messages":[{"role":"tool","content":"1"},{"role":"tool","content":"2"}]}`)
	if status != 500 || ev[0] != `{"error":{"message":"boom"}}` {
		t.Errorf("got %d %q, want the scripted 500", status, ev)
	}

	// A request without tools is a title request: plain text, not scripted.
	_, ev = post(t, a, `{"stream":true,"messages":[{"role":"user","content":"title?"}]}`)
	if !strings.Contains(ev[1], `"content":"Fake title"`) {
		t.Errorf("title answer %s", ev[1])
	}
	reqs := a.Requests()
	if len(reqs) != 4 || reqs[1].UserText() != "go" || reqs[1].LastToolResult() != "ok" || reqs[0].ToolNames()[0] != "bash" {
		t.Errorf("requests recorded: %+v", reqs)
	}
}

// TestCLI runs the pinned OpenCode against the fake once, as the runner's
// end-to-end tests will: the fake's tool call runs, and the stream ends
// with a step_finish whose reason is "stop".
func TestCLI(t *testing.T) {
	bin := Binary(t)
	a := NewAPI(t, func(r Request) Reply {
		if r.ToolResults() == 0 {
			return Shell("echo hi > out.txt")
		}
		return Text("Done. <task-done>T1</task-done>")
	})
	home, dir := t.TempDir(), t.TempDir()
	cmd := exec.CommandContext(t.Context(), bin, "run", "--format", "json", "--title", "ralph")
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, a.Env(home)...)
	cmd.Stdin = strings.NewReader("write out.txt")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, `"type":"step_finish"`) || !strings.Contains(last, `"reason":"stop"`) {
		t.Errorf("last line %s, want a step_finish with reason stop", last)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("out.txt: %q, %v", b, err)
	}
	for _, r := range a.Requests() {
		if len(r.Tools) == 0 {
			t.Errorf("a request without tools (a title request) despite --title")
		}
		if r.Model != "fake-model" {
			t.Errorf("model %q", r.Model)
		}
	}
}
