package opencode

import (
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/agents/opencode/opencodetest"
	"github.com/ralph-dev/ralph/loop"
)

// TestE2EPermissionRefused: with a permission set to "ask", `opencode run`
// rejects the agent's shell command and the session ends without a last
// step (exit 0). That is a refusal — every retry would end so — said in
// words that name the permission and what to change, without the
// terminal codes of OpenCode's stderr.
func TestE2EPermissionRefused(t *testing.T) {
	api := opencodetest.NewAPI(t, func(r opencodetest.Request) opencodetest.Reply {
		if r.ToolResults() == 0 {
			return opencodetest.Shell("echo hi > out.txt")
		}
		return opencodetest.Text("Done. <task-done>T1</task-done>")
	})
	req := e2eRequest(t, api)
	req.Env = append(req.Env, EnvConfigContent+`={"permission":{"bash":"ask"}}`)
	res, _ := runReal(t, t.Context(), &Runner{}, api, req)
	if res.Class != loop.ClassRefused {
		t.Fatalf("class %s (%s), want refused", res.Class, loop.Describe(res))
	}
	why := loop.Describe(res)
	for _, want := range []string{"permissions refused bash (echo hi > out.txt)", `"ask"`, `{"permission": {"bash": "allow"}}`} {
		if !strings.Contains(why, want) {
			t.Errorf("the refusal does not say %q: %s", want, why)
		}
	}
	if strings.ContainsRune(why, 0x1b) {
		t.Errorf("the refusal carries terminal codes: %q", why)
	}
	if n := len(api.Requests()); n != 1 {
		t.Errorf("%d API requests, want 1 (the session ends at the refusal)", n)
	}
}
