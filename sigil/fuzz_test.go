package sigil

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"plain prose",
		"<task-done>t-1</task-done>",
		"<task-done>\n t-1 \n</task-done><task-failed>t-1</task-failed><task-failed>t-2</task-failed>",
		"<promise>COMPLETE</promise><promise>FAILURE</promise>",
		"<next-model>opus</next-model><next-model>bogus</next-model>",
		"<verify-pass/><verify-pass /><verify-pass></verify-pass>",
		"<verify-fail>x < y\n```\n</verify-fail>\n```\n</verify-fail>",
		"<verify-fail>unclosed <verify-fail>",
		"```\n<task-done>t-1</task-done>\n```\n<task-done>t-2</task-done>",
		"~~~~\n~~~\n<task-done>t-1</task-done>\n~~~~",
		"```go\nunclosed <promise>COMPLETE</promise>",
		"`` `<task-done>t-1</task-done>` `` <task-done>t-2</task-done>",
		"\\``<task-done>t-1</task-done>` ``` ` `` `",
		"a ` b\n\n<task-done>t-1</task-done> `",
		"<task-done>t-1 `</task-done>`</task-done>",
		"< task-done>x</task-done><task-done >y</task-done\t>",
		"RALPH_DONE\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := Parse(text)
		if diff := cmp.Diff(got, Parse(text)); diff != "" {
			t.Fatalf("Parse is not deterministic (-first +second):\n%s", diff)
		}
		if !strings.Contains(text, "<") && !got.Empty() {
			t.Fatalf("text without '<' gave sigils: %+v", got)
		}
		for _, ids := range [][]string{got.Done, got.Failed} {
			for _, id := range ids {
				if id == "" || !strings.Contains(text, id) || strings.ContainsAny(id, "<\n\r") {
					t.Fatalf("bad id %q from %q", id, text)
				}
			}
		}
		for _, id := range got.Failed {
			if got.TaskDone(id) {
				t.Fatalf("id %q both done and failed", id)
			}
		}
		if got.NextModel != "" && !strings.Contains(text, got.NextModel) {
			t.Fatalf("next model %q not in text", got.NextModel)
		}
		if got.VerifyPass && got.VerifyFail {
			t.Fatalf("both verify pass and fail")
		}
		if !strings.Contains(text, got.VerifyReason) {
			t.Fatalf("verify reason %q not in text", got.VerifyReason)
		}
		// Spans are ordered, disjoint and inside the text.
		prev := 0
		for _, s := range quotedSpans(text) {
			if s.start < prev || s.end <= s.start || s.end > len(text) {
				t.Fatalf("bad span %+v after %d in %q", s, prev, text)
			}
			prev = s.end
		}
		_ = RalphDone(text)
	})
}
