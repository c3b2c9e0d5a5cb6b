package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag/progress"
)

const twoPhases = `# Progress: Shop

## Status
In Progress

## Tasks
### Phase 1: Backend
- [ ] Add the cart
- [ ] Add checkout

### Phase 2: Frontend
- [ ] Cart page
- [ ] Checkout page
- [ ] Receipt email

## Notes
The user's own section: ralph keeps it byte for byte.

## Completed This Iteration

## Recent Attempts

## Iteration Log
| Iteration | Started | Duration | Tasks Completed | Notes |
|-----------|---------|----------|-----------------|-------|
`

// TestProgressFileAsANewUser is the "done when" for progress-file
// mode, tried as a new user would: a progress file with two phases, worked
// through by `ralph build --progress` with a stand-in agent that forgets
// sigils, crashes once, ticks two boxes itself in one session, and finally
// writes RALPH_DONE. Every iteration gets its Iteration Log row with the
// right count of tasks completed, Recent Attempts keeps the last five
// troubled iterations, RALPH_DONE ends the run (exit 0) with a box left,
// and the user's own text survives.
func TestProgressFileAsANewUser(t *testing.T) {
	h := newHarness(t)
	path := h.write("progress.md", twoPhases)
	tick := func(box string) string { return fmt.Sprintf(`sed -i 's/- \[ \] %s$/- [x] %s/' progress.md`, box, box) }
	agent, script := fakeAgentPath(t,
		agentStep{Text: "Worked on the cart."},           // 1 add-the-cart: no sigil
		agentStep{Crash: true},                           // 2 add-the-cart: agent trouble
		agentStep{Text: "Still on the cart."},            // 3 add-the-cart: no sigil
		agentStep{Text: done},                            // 4 add-the-cart: done
		agentStep{Text: "Checkout is hard."},             // 5 add-checkout: no sigil
		agentStep{Text: "Checkout is still hard."},       // 6 add-checkout: no sigil
		agentStep{Text: done},                            // 7 add-checkout: done
		agentStep{Sh: tick("Checkout page"), Text: done}, // 8 cart-page by sigil, checkout-page ticked by hand
		agentStep{Text: "The mailer is down."},           // 9 receipt-email: no sigil
		agentStep{Sh: `sed -i 's/^In Progress$/RALPH_DONE/' progress.md`, Text: "Good enough; calling it done."}, // 10
	)
	r := h.build(t.Context(), agent, "--progress", path)
	if r.code != 0 || lastLine(r.stdout) != "complete: the plan says it is done (RALPH_DONE), 1 task unfinished" {
		t.Fatalf("exit %d, last line %q\nstdout:\n%s\nstderr:\n%s", r.code, lastLine(r.stdout), r.stdout, r.stderr)
	}
	want := []string{"add-the-cart", "add-the-cart", "add-the-cart", "add-the-cart", "add-checkout", "add-checkout", "add-checkout", "cart-page", "receipt-email", "receipt-email"}
	if diff := cmp.Diff(want, taskIDs(agentCalls(t, script))); diff != "" {
		t.Fatalf("tasks run (-want +got):\n%s", diff)
	}

	text := h.read("progress.md")
	d, err := progress.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Done {
		t.Error("RALPH_DONE is gone from the Status section")
	}
	var boxes []string
	for _, it := range d.Tasks() {
		boxes = append(boxes, fmt.Sprintf("%s %v", it.ID, it.Checked))
	}
	if diff := cmp.Diff([]string{"add-the-cart true", "add-checkout true", "cart-page true", "checkout-page true", "receipt-email false"}, boxes); diff != "" {
		t.Errorf("boxes (-want +got):\n%s", diff)
	}

	// One row per iteration: number, tasks completed, notes.
	var rows []string
	for _, row := range d.Log {
		rows = append(rows, row.Cells[0]+" "+row.Cells[3]+" "+row.Cells[4])
	}
	wantRows := []string{
		"1 0 Add the cart (add-the-cart): no_sigil",
		"2 0 Add the cart (add-the-cart): agent_trouble",
		"3 0 Add the cart (add-the-cart): no_sigil",
		"4 1 Add the cart (add-the-cart): done",
		"5 0 Add checkout (add-checkout): no_sigil",
		"6 0 Add checkout (add-checkout): no_sigil",
		"7 1 Add checkout (add-checkout): done",
		"8 2 Cart page (cart-page): done",
		"9 0 Receipt email (receipt-email): no_sigil",
		"10 0 Receipt email (receipt-email): no_sigil",
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("Iteration Log (-want +got):\n%s", diff)
	}

	// Seven troubled iterations; the oldest two were dropped, the rest are
	// oldest first.
	var attempts []string
	for _, a := range d.Attempts {
		attempts = append(attempts, fmt.Sprintf("%d %s", a.Iteration, a.Result))
	}
	wantAttempts := []string{
		"3 no_sigil: the agent ended without a task sigil",
		"5 no_sigil: the agent ended without a task sigil",
		"6 no_sigil: the agent ended without a task sigil",
		"9 no_sigil: the agent ended without a task sigil",
		"10 no_sigil: the agent ended without a task sigil",
	}
	if diff := cmp.Diff(wantAttempts, attempts); diff != "" {
		t.Errorf("Recent Attempts (-want +got):\n%s", diff)
	}
	if !strings.Contains(text, "## Notes\nThe user's own section: ralph keeps it byte for byte.\n") {
		t.Errorf("the user's section was changed:\n%s", text)
	}
}

// TestProgressDryRunSkipsExamples: a checkbox shown as an example in an
// indented code block, an HTML block or a block quote is not the next
// task; `ralph build --progress FILE --dry-run` names the first real one.
func TestProgressDryRunSkipsExamples(t *testing.T) {
	h := newHarness(t)
	path := h.write("progress.md", "# Progress: Shop\n\n## Status\nIn Progress\n\n## Tasks\n"+
		"A task is written like this:\n\n    - [ ] Example task\n\n"+
		"<details>\n- [ ] Hidden idea\n</details>\n\n"+
		"> - [ ] Quoted task\n\n"+
		"- Backend\n  - [ ] Add the cart\n")
	agent, script := fakeAgentPath(t, agentStep{Text: done})
	r := h.build(t.Context(), agent, "--progress", path, "--dry-run")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "next task: add-the-cart Add the cart\n") {
		t.Errorf("exit %d, stdout %q, stderr %q; want the next task to be add-the-cart", r.code, r.stdout, r.stderr)
	}
	if calls := agentCalls(t, script); len(calls) != 0 {
		t.Errorf("%d agent sessions ran", len(calls))
	}
}
