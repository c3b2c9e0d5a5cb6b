package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// taskJSON is a task as list, show and peek print it (DESIGN §5): exactly
// these keys, in this order. parent_id is null when the task has none;
// feature and claimed_by are always strings, "" when unset, so a consumer
// compares them without null checks; blocked_by is [] when empty.
type taskJSON struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Status      string   `json:"status"`
	Priority    int      `json:"priority"`
	ParentID    *string  `json:"parent_id"`
	Feature     string   `json:"feature"`
	ClaimedBy   string   `json:"claimed_by"`
	RetryCount  int      `json:"retry_count"`
	BlockedBy   []string `json:"blocked_by"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
}

// taskShowJSON is `task show --json`: the task and its log.
type taskShowJSON struct {
	taskJSON
	Logs []logJSON `json:"logs"`
}

// logJSON is one entry of a task's history (DESIGN §8, "Task history").
type logJSON struct {
	At      string `json:"at"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Actor   string `json:"actor"`
}

// jsonTime formats t as RFC 3339 in UTC, with sub-second digits when it has
// any ("" for the zero time).
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func toJSON(t loop.Task) taskJSON {
	j := taskJSON{
		ID:          t.ID,
		Title:       t.Title,
		Description: t.Description,
		Status:      string(t.Status),
		Priority:    t.Priority,
		Feature:     t.Feature,
		ClaimedBy:   t.ClaimedBy,
		RetryCount:  t.RetryCount,
		BlockedBy:   t.BlockedBy,
		CreatedAt:   jsonTime(t.CreatedAt),
		UpdatedAt:   jsonTime(t.UpdatedAt),
	}
	if t.ParentID != "" {
		p := t.ParentID
		j.ParentID = &p
	}
	if j.BlockedBy == nil {
		j.BlockedBy = []string{}
	}
	return j
}

func tasksJSON(tasks []loop.Task) []taskJSON {
	out := make([]taskJSON, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, toJSON(t))
	}
	return out
}

func logsJSON(logs []loop.LogEntry) []logJSON {
	out := make([]logJSON, 0, len(logs))
	for _, l := range logs {
		out = append(out, logJSON{At: jsonTime(l.At), Kind: l.Kind, Message: l.Message, Actor: l.Actor})
	}
	return out
}

// writeJSON prints v indented, without HTML escaping, and a newline.
func writeJSON(w io.Writer, v any) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	return bw.Flush()
}

// writeTaskTable prints one task a line: id, status, priority, title, then
// its parent, blockers and holder when it has any.
func writeTaskTable(w io.Writer, tasks []loop.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPRI\tTITLE")
	for _, t := range tasks {
		var extra []string
		if t.ParentID != "" {
			extra = append(extra, "parent "+t.ParentID)
		}
		if len(t.BlockedBy) > 0 {
			extra = append(extra, "after "+strings.Join(t.BlockedBy, ","))
		}
		if t.ClaimedBy != "" {
			extra = append(extra, "by "+t.ClaimedBy)
		}
		title := strings.Join(strings.Fields(t.Title), " ")
		if len(extra) > 0 {
			title += "  (" + strings.Join(extra, "; ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.ID, t.Status, t.Priority, title)
	}
	return tw.Flush()
}

// writeTaskText prints a task and its log for people.
func writeTaskText(w io.Writer, t loop.Task, logs []loop.LogEntry) error {
	bw := bufio.NewWriter(w)
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(bw, "%-12s %s\n", name+":", value)
		}
	}
	field("id", t.ID)
	field("title", t.Title)
	field("status", string(t.Status))
	field("priority", fmt.Sprint(t.Priority))
	field("parent", t.ParentID)
	field("feature", t.Feature)
	field("blocked by", strings.Join(t.BlockedBy, ", "))
	if t.ClaimedBy != "" {
		claim := t.ClaimedBy
		if !t.ClaimedAt.IsZero() {
			claim += " since " + jsonTime(t.ClaimedAt)
		}
		if !t.LeaseExpiresAt.IsZero() {
			claim += ", lease until " + jsonTime(t.LeaseExpiresAt)
		}
		claim += fmt.Sprintf(" (claim %d", t.Generation)
		if t.ClaimMode != "" {
			claim += ", by the " + string(t.ClaimMode)
		}
		if !t.Holder.IsZero() {
			claim += ", holder " + t.Holder.String()
		}
		field("claimed by", claim+")")
	}
	if t.RetryCount > 0 {
		field("retries", fmt.Sprint(t.RetryCount))
	}
	field("verified", t.VerificationStatus)
	field("created", jsonTime(t.CreatedAt))
	field("updated", jsonTime(t.UpdatedAt))
	if d := strings.TrimSpace(t.Description); d != "" {
		fmt.Fprintf(bw, "\n%s\n", d)
	}
	if len(logs) > 0 {
		fmt.Fprintln(bw, "\nlog:")
		for _, l := range logs {
			actor := l.Actor
			if actor == "" {
				actor = "-"
			}
			fmt.Fprintf(bw, "  %s  %-15s %-16s %s\n", l.At.UTC().Format(time.RFC3339), l.Kind, actor, strings.Join(strings.Fields(l.Message), " "))
		}
	}
	return bw.Flush()
}

// countsJSON is `plan-status --json`.
type countsJSON struct {
	Open    int `json:"open"`
	Active  int `json:"active"`
	Done    int `json:"done"`
	Failed  int `json:"failed"`
	Blocked int `json:"blocked"`
	Total   int `json:"total"`
}

func toCountsJSON(c loop.Counts) countsJSON {
	return countsJSON{Open: c.Open(), Active: c.InProgress, Done: c.Done, Failed: c.Failed, Blocked: c.Blocked, Total: c.Total()}
}
