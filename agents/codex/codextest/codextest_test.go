package codextest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// post sends a streaming request to api and returns the SSE event types and
// the data of each event.
func post(t *testing.T, api *API, body string) (int, []string, []map[string]any) {
	t.Helper()
	resp, err := http.Post(api.URL+"/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	var data []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			types = append(types, ev)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("data %q: %v", d, err)
			}
			data = append(data, m)
		}
	}
	return resp.StatusCode, types, data
}

func TestAPIScript(t *testing.T) {
	api := NewAPI(t, func(r Request) Reply {
		if len(r.ToolOutputs()) == 0 {
			return Shell("echo hi > out.txt")
		}
		return Text("Done.")
	})
	_, types, data := post(t, api, `{"model":"gpt-5.5","stream":true,"input":[
		{"type":"message","role":"developer","content":[{"type":"input_text","text":"base"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"do it"}]}]}`)
	want := []string{"response.created", "response.output_item.added", "response.output_item.done", "response.completed"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("first reply's events (-want +got):\n%s", diff)
	}
	item := data[2]["item"].(map[string]any)
	var args struct{ Cmd string }
	argText, _ := item["arguments"].(string)
	if err := json.Unmarshal([]byte(argText), &args); err != nil || item["name"] != "exec_command" || args.Cmd != "echo hi > out.txt" {
		t.Errorf("function call %v (%v), want exec_command with the command", item, err)
	}

	_, types, data = post(t, api, `{"model":"gpt-5.5","stream":true,"input":[
		{"type":"function_call","name":"exec_command","call_id":"c1","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"Process exited with code 0\nOutput:\n"}]}`)
	want = []string{"response.created", "response.output_item.added", "response.output_text.delta", "response.output_item.done", "response.completed"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("second reply's events (-want +got):\n%s", diff)
	}
	usage := data[len(data)-1]["response"].(map[string]any)["usage"].(map[string]any)
	if usage["input_tokens"] != float64(UsageInput) || usage["output_tokens"] != float64(UsageOutput) {
		t.Errorf("usage %v", usage)
	}

	reqs := api.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests recorded, want 2", len(reqs))
	}
	if diff := cmp.Diff([]string{"base"}, reqs[0].Messages("developer")); diff != "" {
		t.Errorf("developer messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Process exited with code 0\nOutput:\n"}, reqs[1].ToolOutputs()); diff != "" {
		t.Errorf("tool outputs (-want +got):\n%s", diff)
	}
}

func TestAPIStatus(t *testing.T) {
	reset := time.Unix(1800000000, 0)
	api := NewAPI(t, func(Request) Reply { return UsageLimit(reset) })
	resp, err := http.Post(api.URL+"/responses", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Type     string `json:"type"`
			ResetsAt int64  `json:"resets_at"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 429 || body.Error.Type != "usage_limit_reached" || body.Error.ResetsAt != reset.Unix() {
		t.Errorf("got %d %+v, want 429 usage_limit_reached resets_at %d", resp.StatusCode, body, reset.Unix())
	}
}

func TestConfig(t *testing.T) {
	got := Config("http://127.0.0.1:1/v1", 0)
	for _, want := range []string{`model_provider = "fake"`, `base_url = "http://127.0.0.1:1/v1"`,
		"request_max_retries = 0", "stream_max_retries = 0", `wire_api = "responses"`} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
}
