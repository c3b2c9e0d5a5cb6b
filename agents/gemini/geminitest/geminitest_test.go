package geminitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAPIStream checks the fake's framing without the CLI: one
// server-sent event per part, usage on the last.
func TestAPIStream(t *testing.T) {
	api := NewAPI(t, func(r Request) Reply {
		if r.ToolResults() == 0 {
			return Shell("echo hi")
		}
		return Text("a", "b")
	})
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]},` +
		`{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{"command":"echo hi"}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{"output":"hi"}}}]}],` +
		`"systemInstruction":{"parts":[{"text":"sys"}]},"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`
	resp, err := http.Post(api.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var texts []string
	var usage []bool
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Candidates []struct {
				Content struct{ Parts []Part }
			}
			UsageMetadata *struct{ PromptTokenCount int }
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		texts = append(texts, ev.Candidates[0].Content.Parts[0].Text)
		usage = append(usage, ev.UsageMetadata != nil)
	}
	if diff := cmp.Diff([]string{"a", "b"}, texts); diff != "" {
		t.Errorf("texts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{false, true}, usage); diff != "" {
		t.Errorf("usage on events (-want +got):\n%s", diff)
	}
	reqs := api.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	got := []string{r.Model, r.Method, r.SystemText(), r.UserText(), r.LastToolResult(), strings.Join(r.ToolNames(), ",")}
	want := []string{"gemini-2.5-flash", "streamGenerateContent", "sys", "hi", `{"output":"hi"}`, "run_shell_command"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

// TestRealCLI runs the pinned CLI headless against the fake: a shell tool
// call, then a final text. The prompt goes on stdin.
func TestRealCLI(t *testing.T) {
	bin := Binary(t)
	api := NewAPI(t, func(r Request) Reply {
		if r.ToolResults() == 0 {
			return Shell("echo hi > out.txt")
		}
		return Text("Done. ", "<task-done>T1</task-done>")
	})
	dir := t.TempDir()
	cmd := exec.Command(bin, "--output-format", "stream-json", "-m", "gemini-2.5-flash", "--yolo")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), api.Env(t.TempDir())...)
	cmd.Env = append(cmd.Env, "GEMINI_CLI_NO_RELAUNCH=true", "GEMINI_CLI_TRUST_WORKSPACE=true")
	cmd.Stdin = strings.NewReader("Create out.txt")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil || string(b) != "hi\n" {
		t.Errorf("out.txt = %q, %v; want \"hi\\n\"", b, err)
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var v struct{ Type string }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		types = append(types, v.Type)
	}
	want := []string{"init", "message", "tool_use", "tool_result", "message", "message", "result"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
	reqs := api.Requests()
	if len(reqs) != 2 || reqs[1].ToolResults() != 1 || !strings.Contains(reqs[0].UserText(), "Create out.txt") {
		t.Errorf("requests: %+v", reqs)
	}
}
