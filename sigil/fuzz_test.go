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
		checkReference(t, text)
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

// tokens is the alphabet of FuzzParseTokens: the pieces sigils and markdown
// quoting are made of, so that random input reaches the interesting cases
// far more often than random bytes do.
var tokens = []string{
	"<task-done>", "</task-done>", "<task-failed>", "</task-failed>",
	"<promise>", "</promise>", "COMPLETE", "FAILURE",
	"<next-model>", "</next-model>", "opus", "haiku",
	"<verify-pass/>", "<verify-pass>", "</verify-pass>",
	"<verify-fail>", "</verify-fail>", "<verify-fail/>",
	"t-1", "t-2", " ", "\n", "\n\n", "\t", "<", ">", "/",
	"`", "``", "```", "~~~", "\\", "```\n", "~~~~\n", "\n```\n", "    ",
	"RALPH_DONE", "x", "- ", "> ", "1. ",
}

// FuzzParseTokens checks Parse against the reference on texts assembled
// from tokens, each input byte choosing one.
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte{0, 18, 1})
	f.Add([]byte{27, 0, 18, 1, 27, 0, 19, 1})
	f.Add([]byte{34, 0, 18, 1, 34, 0, 19, 1})
	f.Add([]byte{15, 29, 16, 29, 16, 27, 14})
	f.Add([]byte{32, 28, 0, 18, 28, 1, 28, 21, 27, 24})
	f.Fuzz(func(t *testing.T, choice []byte) {
		var b strings.Builder
		for _, c := range choice {
			b.WriteString(tokens[int(c)%len(tokens)])
		}
		checkReference(t, b.String())
	})
}
