package loop

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// PeekParams is what WritePeek renders.
type PeekParams struct {
	// Claimable are the ready tasks, in claim order, already cut to the
	// number the caller wants shown.
	Claimable []Task
	// Active are the in_progress tasks.
	Active []Task
	// Now is the time lease ages are measured against.
	Now time.Time
	// BlockerSummaries maps the id of a done blocker to its latest log
	// message, shown under the claimable tasks it unblocked. Optional.
	BlockerSummaries map[string]string
}

// FormatPeek writes the markdown peek: the claimable tasks (id,
// title, priority, description) and the active ones (id, title, holder,
// lease age). When claimable is empty it writes nothing at all, not even a
// newline, whatever active holds: an empty peek means "nothing to do".
//
// It is WritePeek without blocker summaries.
func FormatPeek(w io.Writer, claimable, active []Task, now time.Time) error {
	return WritePeek(w, PeekParams{Claimable: claimable, Active: active, Now: now})
}

// WritePeek writes the markdown peek described at FormatPeek, adding under
// each claimable task the latest log message of its done blockers when
// p.BlockerSummaries has one. The output is deterministic for given input.
func WritePeek(w io.Writer, p PeekParams) error {
	if len(p.Claimable) == 0 {
		return nil
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Claimable tasks (%d)\n", len(p.Claimable))
	for _, t := range p.Claimable {
		writeClaimable(bw, t, p.BlockerSummaries)
	}
	if len(p.Active) > 0 {
		fmt.Fprintf(bw, "\n# Active tasks (%d)\n\n", len(p.Active))
		for _, t := range p.Active {
			writeActive(bw, t, p.Now)
		}
	}
	return bw.Flush()
}

func writeClaimable(w *bufio.Writer, t Task, summaries map[string]string) {
	fmt.Fprintf(w, "\n## %s: %s\n\n", t.ID, oneLine(t.Title))
	fmt.Fprintf(w, "- priority: %d\n", t.Priority)
	if t.ParentID != "" {
		fmt.Fprintf(w, "- parent: %s\n", t.ParentID)
	}
	if t.Feature != "" {
		fmt.Fprintf(w, "- feature: %s\n", t.Feature)
	}
	if t.RetryCount > 0 {
		fmt.Fprintf(w, "- retries so far: %d\n", t.RetryCount)
	}
	if len(t.BlockedBy) > 0 {
		fmt.Fprintf(w, "- blocked by (all done): %s\n", strings.Join(t.BlockedBy, ", "))
		for _, b := range t.BlockedBy {
			if s := summaries[b]; s != "" {
				fmt.Fprintf(w, "  - %s: %s\n", b, oneLine(s))
			}
		}
	}
	if d := strings.TrimSpace(t.Description); d != "" {
		fmt.Fprintf(w, "\n%s\n", d)
	}
}

func writeActive(w *bufio.Writer, t Task, now time.Time) {
	holder := t.ClaimedBy
	if holder == "" {
		holder = "unknown agent"
	}
	fmt.Fprintf(w, "- %s: %s (claimed by %s", t.ID, oneLine(t.Title), holder)
	if !t.ClaimedAt.IsZero() {
		age := now.Sub(t.ClaimedAt)
		if age < 0 {
			age = 0
		}
		fmt.Fprintf(w, ", %s ago", age.Truncate(time.Second))
	}
	w.WriteString(")\n")
}

// oneLine folds runs of whitespace, newlines included, into single spaces so
// a title or summary cannot break the markdown structure.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
