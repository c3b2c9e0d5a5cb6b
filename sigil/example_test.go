package sigil_test

import (
	"fmt"

	"github.com/ralph-dev/ralph/sigil"
)

func ExampleParse() {
	answer := "I added the handler. The prompt's form is `<task-done>ID</task-done>`.\n" +
		"\n" +
		"<task-done>t-7</task-done>\n" +
		"<next-model>haiku</next-model>\n"
	r := sigil.Parse(answer)
	fmt.Println("done:", r.Done)
	fmt.Println("t-7 done:", r.TaskDone("t-7"))
	fmt.Println("next model:", r.NextModel)
	fmt.Println("complete:", r.Complete)
	// Output:
	// done: [t-7]
	// t-7 done: true
	// next model: haiku
	// complete: false
}

func ExampleParse_verifier() {
	verdict := "Tests pass, but the migration is missing.\n" +
		"<verify-pass/>\n" +
		"<verify-fail>\n  no migration for the new column\n</verify-fail>\n"
	r := sigil.Parse(verdict)
	fmt.Println("pass:", r.VerifyPass)
	fmt.Println("fail:", r.VerifyFail)
	fmt.Println("reason:", r.VerifyReason)
	// Output:
	// pass: false
	// fail: true
	// reason: no migration for the new column
}

func ExampleRalphDone() {
	status := "# Progress: login\n## Status\nRALPH_DONE\n## Tasks\n- [x] add handler\n"
	fmt.Println(sigil.RalphDone(status))
	fmt.Println(sigil.RalphDone("## Status\nIn Progress (write RALPH_DONE when finished)\n"))
	// Output:
	// true
	// false
}

func ExampleModels() {
	fmt.Println(sigil.Models())
	// Output: [opus sonnet haiku]
}
