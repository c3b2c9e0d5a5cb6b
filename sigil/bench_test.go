package sigil

import (
	"fmt"
	"strings"
	"testing"
)

// realisticText builds about size bytes of agent-like markdown: prose with
// inline code, fenced Go and shell blocks full of '<', quoted sigils that
// must not count, and real sigils at the end.
func realisticText(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "## Step %d\n\n", i)
		fmt.Fprintf(&b, "I read `internal/auth/handler_%d.go` and found that `Login` returns `nil, nil` when the\n", i)
		b.WriteString("password is empty. The plan says to answer with `<task-done>ID</task-done>` only once\n")
		b.WriteString("the tests pass, so I fixed the check first (see below) and kept `a < b` semantics.\n\n")
		b.WriteString("```go\nfunc check(a, b int) error {\n\tif a < b && b <= 10 {\n")
		fmt.Fprintf(&b, "\t\treturn fmt.Errorf(\"step %d: %%d < %%d\", a, b)\n", i)
		b.WriteString("\t}\n\t// <promise>COMPLETE</promise> is quoted here\n\treturn nil\n}\n```\n\n")
		b.WriteString("Running the tests:\n\n~~~console\n$ go test ./...\nok  \tgithub.com/acme/app/auth\t0.412s\n")
		b.WriteString("<html><body>fixture</body></html>\n~~~\n\n")
		b.WriteString("- [x] handler returns an error for empty passwords\n- [ ] update the `README.md` <b>later</b>\n\n")
	}
	b.WriteString("All green.\n\n<task-done>t-42</task-done>\n<next-model>haiku</next-model>\n")
	return b.String()
}

func BenchmarkParse(b *testing.B) {
	text := realisticText(1 << 20)
	if r := Parse(text); !r.TaskDone("t-42") || r.NextModel != "haiku" || r.Complete {
		b.Fatalf("unexpected result on the benchmark text: %+v", r)
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Parse(text)
	}
}

func BenchmarkParseNoTags(b *testing.B) {
	text := strings.ReplaceAll(realisticText(1<<20), "<", "(")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Parse(text)
	}
}

// BenchmarkParseAdversarial feeds inputs built to make a naive parser
// quadratic: unmatched backtick runs of growing length, unclosed tags and
// unclosed verify-fail openers.
func BenchmarkParseAdversarial(b *testing.B) {
	cases := map[string]string{
		"backtick-runs":   adversarialRuns(1 << 20),
		"unclosed-tags":   strings.Repeat("<task-done>x ", (1<<20)/13),
		"unclosed-verify": strings.Repeat("<verify-fail>x ", (1<<20)/15),
		"quoted-closers":  "<verify-fail>" + strings.Repeat("`</verify-fail>` ", (1<<20)/17),
	}
	for name, text := range cases {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				Parse(text)
			}
		})
	}
}

// adversarialRuns returns one paragraph of about size bytes of backtick runs
// of lengths 1, 2, 3, … each appearing once, so no run has a closer.
func adversarialRuns(size int) string {
	var b strings.Builder
	b.WriteString("<")
	for n := 1; b.Len() < size; n++ {
		b.WriteString(strings.Repeat("`", n))
		b.WriteString(" <task-done>x</task-done> ")
	}
	return b.String()
}
