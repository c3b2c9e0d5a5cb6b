package sigil

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		text string
		want Result
	}{
		// Nothing to find.
		{name: "empty text", text: "", want: Result{}},
		{name: "prose without tags", text: "All done, tests pass.\n", want: Result{}},
		{name: "unknown tag", text: "<task-doing>t-1</task-doing> <b>bold</b>", want: Result{}},
		{name: "lone angle brackets", text: "a < b, c > d, <<>> </ <", want: Result{}},

		// task-done and task-failed.
		{name: "task done", text: "<task-done>t-1</task-done>", want: Result{Done: []string{"t-1"}}},
		{name: "task failed", text: "<task-failed>t-1</task-failed>", want: Result{Failed: []string{"t-1"}}},
		{name: "tag in the middle of prose", text: "I fixed it <task-done>t-1</task-done> and moved on.", want: Result{Done: []string{"t-1"}}},
		{name: "spaces around id", text: "<task-done> t-1 </task-done>", want: Result{Done: []string{"t-1"}}},
		{name: "tag split by newlines inside body", text: "<task-done>\n  t-1\n</task-done>", want: Result{Done: []string{"t-1"}}},
		{name: "CRLF inside body", text: "<task-done>\r\nt-1\r\n</task-done>\r\n", want: Result{Done: []string{"t-1"}}},
		{name: "whitespace before closing brackets", text: "<task-done >t-1</task-done\n>", want: Result{Done: []string{"t-1"}}},
		{name: "space after opening bracket is not a tag", text: "< task-done>t-1</task-done>", want: Result{}},
		{name: "empty id ignored", text: "<task-done></task-done><task-done>  \n </task-done>", want: Result{}},
		{name: "self-closed task-done ignored", text: "<task-done/>", want: Result{}},
		{name: "id with newline is not an id", text: "<task-done>t-1\nt-2</task-done>", want: Result{}},
		{name: "id with tab is not an id", text: "<task-done>t\t1</task-done>", want: Result{}},
		{name: "id with angle bracket is not an id", text: "<task-done>t<1</task-done>", want: Result{}},
		{name: "nested tag breaks the outer one", text: "<task-done>x <task-done>t-2</task-done>", want: Result{Done: []string{"t-2"}}},
		{name: "unclosed tag", text: "<task-done>t-1", want: Result{}},
		{name: "wrong closer", text: "<task-done>t-1</task-failed>", want: Result{}},
		{name: "upper case tag ignored", text: "<TASK-DONE>t-1</TASK-DONE> <Task-Done>t-2</Task-Done>", want: Result{}},
		{name: "tag name needs a boundary", text: "<task-done-x>t-1</task-done-x>", want: Result{}},
		{name: "unicode id", text: "<task-done>tâche-1</task-done>", want: Result{Done: []string{"tâche-1"}}},
		{
			name: "duplicate ids deduplicated in first-seen order",
			text: "<task-done>b</task-done> <task-done>a</task-done> <task-done> b </task-done> <task-done>c</task-done>",
			want: Result{Done: []string{"b", "a", "c"}},
		},
		{
			name: "duplicate failed ids deduplicated",
			text: "<task-failed>a</task-failed><task-failed>a</task-failed>",
			want: Result{Failed: []string{"a"}},
		},
		{
			name: "done wins over failed",
			text: "<task-failed>t-1</task-failed> <task-failed>t-2</task-failed> <task-done>t-1</task-done>",
			want: Result{Done: []string{"t-1"}, Failed: []string{"t-2"}},
		},
		{
			name: "done wins whatever the order",
			text: "<task-done>t-1</task-done> then <task-failed>t-1</task-failed>",
			want: Result{Done: []string{"t-1"}},
		},

		// promise.
		{name: "promise complete", text: "<promise>COMPLETE</promise>", want: Result{Complete: true}},
		{name: "promise failure", text: "<promise>FAILURE</promise>", want: Result{Failure: true}},
		{name: "promise trimmed", text: "<promise>\n COMPLETE \n</promise>", want: Result{Complete: true}},
		{name: "promise other value ignored", text: "<promise>DONE</promise><promise>complete</promise><promise></promise>", want: Result{}},
		{name: "promise both reported", text: "<promise>COMPLETE</promise><promise>FAILURE</promise>", want: Result{Complete: true, Failure: true}},

		// next-model.
		{name: "next model", text: "<next-model>opus</next-model>", want: Result{NextModel: "opus"}},
		{name: "next model trimmed", text: "<next-model> haiku\n</next-model>", want: Result{NextModel: "haiku"}},
		{name: "invalid model ignored", text: "<next-model>gpt-5</next-model>", want: Result{}},
		{name: "model is case-sensitive", text: "<next-model>Opus</next-model>", want: Result{}},
		{
			name: "multiple hints: last wins",
			text: "<next-model>opus</next-model> <next-model>haiku</next-model> <next-model>sonnet</next-model>",
			want: Result{NextModel: "sonnet"},
		},
		{
			name: "invalid hint after a valid one keeps the valid one",
			text: "<next-model>opus</next-model> <next-model>gigantic</next-model>",
			want: Result{NextModel: "opus"},
		},

		// verify-pass and verify-fail.
		{name: "verify pass", text: "<verify-pass/>", want: Result{VerifyPass: true}},
		{name: "verify pass with space", text: "<verify-pass />", want: Result{VerifyPass: true}},
		{name: "verify pass open and close", text: "<verify-pass></verify-pass>", want: Result{VerifyPass: true}},
		{name: "verify pass with whitespace body", text: "<verify-pass>\n</verify-pass>", want: Result{VerifyPass: true}},
		{name: "verify pass with text body is not a pass", text: "<verify-pass>maybe</verify-pass>", want: Result{}},
		{name: "verify pass unclosed is not a pass", text: "<verify-pass> all good", want: Result{}},
		{name: "verify fail", text: "<verify-fail>tests fail</verify-fail>", want: Result{VerifyFail: true, VerifyReason: "tests fail"}},
		{name: "verify fail trimmed", text: "<verify-fail>\n  tests fail \n</verify-fail>", want: Result{VerifyFail: true, VerifyReason: "tests fail"}},
		{name: "verify fail empty reason", text: "<verify-fail></verify-fail>", want: Result{VerifyFail: true}},
		{name: "verify fail self-closed", text: "<verify-fail/>", want: Result{VerifyFail: true}},
		{
			name: "verify fail reason with angle brackets and lines",
			text: "<verify-fail>x < y does not hold\nsecond line</verify-fail>",
			want: Result{VerifyFail: true, VerifyReason: "x < y does not hold\nsecond line"},
		},
		{
			name: "verify fail reason with inline code",
			text: "<verify-fail>`TestLogin` fails: want `<nil>`</verify-fail>",
			want: Result{VerifyFail: true, VerifyReason: "`TestLogin` fails: want `<nil>`"},
		},
		{
			name: "verify fail reason with a fenced block",
			text: "<verify-fail>tests fail:\n```\n--- FAIL: TestX </verify-fail>\n```\nsee above</verify-fail>",
			want: Result{VerifyFail: true, VerifyReason: "tests fail:\n```\n--- FAIL: TestX </verify-fail>\n```\nsee above"},
		},
		{
			name: "tags inside a verify-fail reason are part of it",
			text: "<verify-fail>the agent said <task-done>t-1</task-done> too early</verify-fail>",
			want: Result{VerifyFail: true, VerifyReason: "the agent said <task-done>t-1</task-done> too early"},
		},
		{name: "verify fail unclosed is not a fail", text: "<verify-fail>tests fail", want: Result{}},
		{
			name: "unclosed verify fail does not hide later tags",
			text: "<verify-fail>hmm <verify-fail>again <task-done>t-1</task-done>",
			want: Result{Done: []string{"t-1"}},
		},
		{
			name: "unclosed verify fail keeps later code quoted",
			text: "<verify-fail>hmm\n```\n<task-done>t-1</task-done>\n```\n`</verify-fail>`\n<task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "last verify fail reason wins",
			text: "<verify-fail>first</verify-fail> <verify-fail>second</verify-fail>",
			want: Result{VerifyFail: true, VerifyReason: "second"},
		},
		{
			name: "fail wins over pass",
			text: "<verify-pass/> <verify-fail>flaky test</verify-fail>",
			want: Result{VerifyFail: true, VerifyReason: "flaky test"},
		},
		{
			name: "fail wins over a later pass",
			text: "<verify-fail>flaky test</verify-fail> <verify-pass/>",
			want: Result{VerifyFail: true, VerifyReason: "flaky test"},
		},

		// Quoting: fenced code blocks.
		{name: "backtick fence", text: "```\n<task-done>t-1</task-done>\n```\n", want: Result{}},
		{name: "tilde fence", text: "~~~\n<task-done>t-1</task-done>\n~~~\n", want: Result{}},
		{name: "fence with info string", text: "```xml\n<promise>COMPLETE</promise>\n```", want: Result{}},
		{name: "tag on the fence info line", text: "```<task-done>t-1</task-done>\n```", want: Result{}},
		{name: "indented fence", text: "- step\n    ```\n    <task-done>t-1</task-done>\n    ```\n", want: Result{}},
		{
			name: "fence opened on a list item line",
			text: "1. Run:\n- ```sh\n  <task-done>t-1</task-done>\n  ```\n<task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "fence opened on an ordered list item line",
			text: "12) ~~~\n<task-done>t-1</task-done>\n~~~\n<task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "fence in a block quote",
			text: "> ```\n> <task-done>t-1</task-done>\n> ```\n<task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "list marker needs a space",
			text: "-```\n<task-done>t-1</task-done>\n",
			want: Result{Done: []string{"t-1"}},
		},
		{
			name: "tag in a block quote is prose",
			text: "> <task-done>t-1</task-done>",
			want: Result{Done: []string{"t-1"}},
		},
		{
			name: "tag after a closed fence counts",
			text: "```\n<task-done>t-1</task-done>\n```\n<task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "unclosed fence quotes the rest of the text",
			text: "<task-done>t-1</task-done>\n```go\nfunc f() {}\n<task-done>t-2</task-done>\n<promise>COMPLETE</promise>\n",
			want: Result{Done: []string{"t-1"}},
		},
		{
			name: "longer fence closes only with as many fence characters",
			text: "````\n```\n<task-done>t-1</task-done>\n```\n<task-done>t-2</task-done>\n````\n<task-done>t-3</task-done>",
			want: Result{Done: []string{"t-3"}},
		},
		{
			name: "tilde fence is not closed by backticks",
			text: "~~~\n```\n<task-done>t-1</task-done>\n```\n~~~~~\n<task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "closing fence may not carry text",
			text: "```\n``` not a closer <task-done>t-1</task-done>\n<task-done>t-2</task-done>",
			want: Result{},
		},
		{
			name: "two backticks do not open a fence",
			text: "``\n<task-done>t-1</task-done>\n",
			want: Result{Done: []string{"t-1"}},
		},
		{
			name: "backtick line with more backticks is inline code, not a fence",
			text: "```<task-done>t-1</task-done>``` <task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "closer inside a fence does not close a prose tag",
			text: "<task-done>t-1\n```\n</task-done>\n```\n",
			want: Result{},
		},

		// Quoting: inline code.
		{name: "inline code", text: "Answer with `<task-done>t-1</task-done>` when done.", want: Result{}},
		{name: "double backtick span", text: "Use ``<promise>COMPLETE</promise>``.", want: Result{}},
		{
			name: "nested backticks in a double backtick span",
			text: "Write `` `<task-done>t-1</task-done>` `` then <task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "span closes only on a run of the same length",
			text: "``a ` <task-done>t-1</task-done> ``` <task-done>t-2</task-done> `` <task-done>t-3</task-done>",
			want: Result{Done: []string{"t-3"}},
		},
		{
			name: "unmatched backtick is literal",
			text: "don't ` worry <task-done>t-1</task-done>",
			want: Result{Done: []string{"t-1"}},
		},
		{
			name: "unmatched long run then a matched short span",
			text: "``` x `<task-done>t-1</task-done>` <task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "inline code spans lines within a paragraph",
			text: "see `the\n<task-done>t-1</task-done>\nspan` <task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "inline code does not cross a blank line",
			text: "a stray ` here\n\n<task-done>t-1</task-done> and ` there",
			want: Result{Done: []string{"t-1"}},
		},
		{
			name: "inline code does not cross a fence",
			text: "a stray ` here\n```\ncode\n```\n<task-done>t-1</task-done> and ` there",
			want: Result{Done: []string{"t-1"}},
		},
		{
			name: "escaped backtick does not open a span",
			text: "\\`<task-done>t-1</task-done>`",
			want: Result{Done: []string{"t-1"}},
		},
		{
			name: "escaped backslash before a backtick opens a span",
			text: "\\\\`<task-done>t-1</task-done>`",
			want: Result{},
		},
		{
			name: "escaped double run opens a single-backtick span",
			text: "\\``<task-done>t-1</task-done>` <task-done>t-2</task-done>",
			want: Result{Done: []string{"t-2"}},
		},
		{
			name: "closer inside inline code does not close a prose tag",
			text: "<task-done>t-1 `</task-done>`",
			want: Result{},
		},

		// Everything together.
		{
			name: "realistic final answer",
			text: "I implemented the login handler and added tests.\n\n" +
				"The prompt asked me to answer with `<task-done>ID</task-done>`; here is the check:\n\n" +
				"```go\nif n < 3 {\n\treturn \"<task-failed>t-9</task-failed>\"\n}\n```\n\n" +
				"<task-done>t-4</task-done>\n<next-model>haiku</next-model>\n",
			want: Result{Done: []string{"t-4"}, NextModel: "haiku"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(tt.text)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}

func TestResultMethods(t *testing.T) {
	r := Parse("<task-done>a</task-done> <task-failed>a</task-failed> <task-failed>b</task-failed>")
	tests := []struct {
		name string
		got  bool
		want bool
	}{
		{name: "done id is done", got: r.TaskDone("a"), want: true},
		{name: "failed id is not done", got: r.TaskDone("b"), want: false},
		{name: "unknown id is not done", got: r.TaskDone("c"), want: false},
		{name: "done and failed id is not failed", got: r.TaskFailed("a"), want: false},
		{name: "failed id is failed", got: r.TaskFailed("b"), want: true},
		{name: "result with ids is not empty", got: r.Empty(), want: false},
		{name: "zero result is empty", got: Result{}.Empty(), want: true},
		{name: "next model alone is not empty", got: Result{NextModel: "opus"}.Empty(), want: false},
		{name: "verify fail alone is not empty", got: Result{VerifyFail: true}.Empty(), want: false},
		{name: "verify pass alone is not empty", got: Result{VerifyPass: true}.Empty(), want: false},
		{name: "complete alone is not empty", got: Result{Complete: true}.Empty(), want: false},
		{name: "failure alone is not empty", got: Result{Failure: true}.Empty(), want: false},
		{name: "failed alone is not empty", got: Result{Failed: []string{"x"}}.Empty(), want: false},
		{name: "quoted sigils are empty", got: Parse("`<promise>COMPLETE</promise>`").Empty(), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestModels(t *testing.T) {
	want := []string{"opus", "sonnet", "haiku"}
	got := Models()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Models() mismatch (-want +got):\n%s", diff)
	}
	got[0] = "changed"
	if diff := cmp.Diff(want, Models()); diff != "" {
		t.Errorf("Models() shares its slice with callers (-want +got):\n%s", diff)
	}
	for _, m := range want {
		text := "<next-model>" + m + "</next-model>"
		if got := Parse(text).NextModel; got != m {
			t.Errorf("Parse(%q).NextModel = %q, want %q", text, got, m)
		}
	}
}

func TestRalphDone(t *testing.T) {
	tests := []struct {
		name string
		text string
		want bool
	}{
		{name: "empty", text: "", want: false},
		{name: "alone", text: "RALPH_DONE", want: true},
		{name: "alone on a line among others", text: "## Status\nRALPH_DONE\n## Tasks\n", want: true},
		{name: "surrounding whitespace", text: "## Status\n  \tRALPH_DONE  \r\n", want: true},
		{name: "in prose", text: "Write RALPH_DONE when finished.", want: false},
		{name: "in inline code", text: "`RALPH_DONE`", want: false},
		{name: "with trailing text", text: "RALPH_DONE!", want: false},
		{name: "lower case", text: "ralph_done", want: false},
		{name: "In Progress", text: "## Status\nIn Progress\n", want: false},
		{name: "in a fenced block", text: "```\nRALPH_DONE\n```\n", want: false},
		{name: "in an unclosed fenced block", text: "~~~\nRALPH_DONE\n", want: false},
		{name: "after a fenced block", text: "```\ncode\n```\nRALPH_DONE\n", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RalphDone(tt.text); got != tt.want {
				t.Errorf("RalphDone(%q) = %v, want %v", tt.text, got, tt.want)
			}
		})
	}
}

func TestQuotedSpans(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string // the quoted text of each span
	}{
		{name: "none", text: "plain <b>", want: nil},
		{name: "inline", text: "a `b` c ``d`` e", want: []string{"`b`", "``d``"}},
		{name: "fence includes its lines", text: "x\n```go\ny\n```\nz", want: []string{"```go\ny\n```"}},
		{name: "unclosed fence to the end", text: "x\n~~~\ny\n", want: []string{"~~~\ny\n"}},
		{name: "many unmatched runs", text: "` `` ``` ```` `x`", want: []string{"` `` ``` ```` `"}},
		{name: "unmatched runs of growing length", text: "a ` b `` c ``` d ```` e", want: nil},
		{name: "long runs", text: strings.Repeat("`", 20) + "x" + strings.Repeat("`", 20) + " " + strings.Repeat("`", 17), want: []string{strings.Repeat("`", 20) + "x" + strings.Repeat("`", 20)}},
		{name: "span after the table is filled", text: "`` ` x ` ``", want: []string{"`` ` x ` ``"}},
		{name: "table answers a later opener", text: "``` a ` b ` c `` d", want: []string{"` b `"}},
		{name: "table finds a near closer", text: "``x```\n<```\n", want: []string{"```\n<```"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range quotedSpans(tt.text) {
				got = append(got, tt.text[s.start:s.end])
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("quotedSpans(%q) mismatch (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}

func TestTagStartTable(t *testing.T) {
	for _, name := range tagNames {
		if !isTagStart[name[0]] {
			t.Errorf("isTagStart misses %q, the first byte of tag %q", name[0], name)
		}
	}
}
