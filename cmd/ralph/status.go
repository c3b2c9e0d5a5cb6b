package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// statusReceipts is how many of the latest receipts `ralph status` shows.
const statusReceipts = 10

func statusCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:   "status",
		Usage:  "show the plan's counts, active claims, the last iterations and the cost so far",
		Flags:  []cli.Flag{jsonFlag()},
		Action: withStore(cfg, status(cfg)),
	}
}

// statusJSON is `ralph status --json`. The keys are stable: counts has the
// keys of `task plan-status --json`; receipts are the latest ones, newest
// first; total_cost_usd and sessions cover every receipt the database holds.
// last_run is the latest run record (runJSON, as `ralph runs --json` gives
// it), omitted when there is none.
type statusJSON struct {
	LastRun      *runJSON      `json:"last_run,omitempty"`
	Counts       countsJSON    `json:"counts"`
	Active       []claimJSON   `json:"active"`
	Receipts     []receiptJSON `json:"receipts"`
	Sessions     int           `json:"sessions"`
	TotalCostUSD float64       `json:"total_cost_usd"`
}

// claimJSON is an active claim. lease_age_seconds is how long ago the claim
// was taken (as `task peek` shows it), lease_left_seconds how long the lease
// still runs unless renewed (negative: expired; the next store call returns
// the task to pending). holder is the process that keeps the claim alive
// (pid, start time, host: RALPH_HOLDER's form; "" for a claim by hand, which
// lives by its lease alone), holder_host its host identity, holder_alive
// what can be seen of it from here ("alive", "gone", "unknown": on another
// host, or no holder process), claim_mode who claimed ("loop", "agent" or
// "" by hand) and generation the claim's number.
type claimJSON struct {
	ID               string  `json:"id"`
	Title            string  `json:"title"`
	ClaimedBy        string  `json:"claimed_by"`
	ClaimedAt        string  `json:"claimed_at"`
	LeaseExpiresAt   string  `json:"lease_expires_at"`
	LeaseAgeSeconds  float64 `json:"lease_age_seconds"`
	LeaseLeftSeconds float64 `json:"lease_left_seconds"`
	Holder           string  `json:"holder"`
	HolderHost       string  `json:"holder_host"`
	HolderAlive      string  `json:"holder_alive"`
	ClaimMode        string  `json:"claim_mode"`
	Generation       int64   `json:"generation"`
}

// receiptJSON is one agent session's receipt.
type receiptJSON struct {
	Session          string  `json:"session"`
	Iteration        int     `json:"iteration"`
	Mode             string  `json:"mode"`
	TaskID           string  `json:"task_id"`
	Model            string  `json:"model"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	StartedAt        string  `json:"started_at"`
	DurationSeconds  float64 `json:"duration_seconds"`
	Turns            int     `json:"turns"`
	ExitReason       string  `json:"exit_reason"`
	Verdict          string  `json:"verdict"`
	// Worker is the worker of a parallel build; omitted without one.
	Worker string `json:"worker,omitempty"`
	// Agent is the agent CLI ("claude", "codex", "gemini", "opencode");
	// "" for receipts of a ralph that did not record it.
	Agent string `json:"agent"`
	// CostSource says how cost_usd is known: "reported" by the agent,
	// "estimated" from tokens with ralph's price table, or "unknown" (no
	// price known; cost_usd is 0).
	CostSource string `json:"cost_source"`
	// Result is how the session's iteration ended (a loop.IterationStatus:
	// "done", "tests_failed", "check_failed", "verify_failed", …); ""
	// while it is under way, for a verifier's session, and for receipts
	// of a ralph that did not record it.
	Result string `json:"result"`
}

func status(cfg appConfig) storeAction {
	return func(c *cli.Context, _ project, st *dag.Store) error {
		if _, err := args(c, 0, 0, ""); err != nil {
			return err
		}
		ctx := c.Context
		counts, err := st.Counts(ctx, loop.Scope{})
		if err != nil {
			return err
		}
		active, err := st.Active(ctx, loop.Scope{})
		if err != nil {
			return err
		}
		all, err := st.Receipts(ctx, 0)
		if err != nil {
			return err
		}
		var total float64
		for _, r := range all {
			total += r.CostUSD
		}
		runs, err := st.Runs(ctx, 1)
		if err != nil {
			return err
		}
		latest := all[:min(len(all), statusReceipts)]
		now := cfg.now()
		if c.Bool("json") {
			s := toStatusJSON(counts, active, latest, len(all), total, now)
			if len(runs) > 0 {
				last := toRunJSON(runs[0])
				s.LastRun = &last
			}
			return writeJSON(cfg.stdout, s)
		}
		if len(runs) > 0 {
			// The last run leads: how it went is the first thing a
			// person coming back asks.
			fmt.Fprintf(cfg.stdout, "%s\n\n", lastRunLine(runs[0], now))
		}
		return writeStatusText(cfg.stdout, counts, active, latest, all, total, now)
	}
}

func toStatusJSON(counts loop.Counts, active []loop.Task, latest []loop.Receipt, n int, total float64, now time.Time) statusJSON {
	s := statusJSON{Counts: toCountsJSON(counts), Active: []claimJSON{}, Receipts: []receiptJSON{}, Sessions: n, TotalCostUSD: total}
	for _, t := range active {
		s.Active = append(s.Active, claimJSON{
			ID: t.ID, Title: t.Title, ClaimedBy: t.ClaimedBy,
			ClaimedAt: jsonTime(t.ClaimedAt), LeaseExpiresAt: jsonTime(t.LeaseExpiresAt),
			LeaseAgeSeconds:  seconds(now.Sub(t.ClaimedAt)),
			LeaseLeftSeconds: seconds(t.LeaseExpiresAt.Sub(now)),
			Holder:           t.Holder.String(), HolderHost: t.Holder.Host, HolderAlive: t.Holder.Liveness().String(),
			ClaimMode: string(t.ClaimMode), Generation: t.Generation,
		})
	}
	for _, r := range latest {
		s.Receipts = append(s.Receipts, receiptJSON{
			Session: r.Session, Iteration: r.Iteration, Mode: r.Mode, TaskID: r.TaskID, Model: r.Model,
			InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
			CacheReadTokens: r.CacheReadTokens, CacheWriteTokens: r.CacheWriteTokens,
			CostUSD: r.CostUSD, StartedAt: jsonTime(r.StartedAt), DurationSeconds: seconds(r.Duration),
			Turns: r.Turns, ExitReason: r.ExitReason, Verdict: r.Verdict, Worker: r.Worker,
			Agent: r.Agent, CostSource: string(costSource(r.CostSource)), Result: string(r.Result),
		})
	}
	return s
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}

// writeStatusText prints the status for people: the plan-status line, the
// active claims with their age and lease, the latest receipts oldest first
// (so the newest is next to the prompt), and the cost.
func writeStatusText(w io.Writer, counts loop.Counts, active []loop.Task, latest, all []loop.Receipt, total float64, now time.Time) error {
	n := len(all)
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "plan: %s\n", counts)
	if len(active) == 0 {
		fmt.Fprintln(bw, "\nactive: none")
	} else {
		fmt.Fprintf(bw, "\nactive (%d):\n", len(active))
		tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
		for _, t := range active {
			lease := "lease expired"
			if left := t.LeaseExpiresAt.Sub(now); left > 0 {
				lease = "lease " + age(left) + " left"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\tclaimed %s ago, %s\t%s\n", t.ID, oneLine(t.Title), t.ClaimedBy, age(now.Sub(t.ClaimedAt)), lease, holderText(t.Holder))
		}
		tw.Flush()
	}
	if len(latest) == 0 {
		fmt.Fprintln(bw, "\nlast iterations: none yet")
	} else {
		fmt.Fprintf(bw, "\nlast iterations (%d of %d):\n", len(latest), n)
		tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
		// The WORKER column is there when a parallel build made any of
		// the receipts shown.
		workers := slices.ContainsFunc(latest, func(r loop.Receipt) bool { return r.Worker != "" })
		// The AGENT column is there when an agent other than Claude Code
		// ran any of them.
		agents := slices.ContainsFunc(latest, func(r loop.Receipt) bool { return r.Agent != "" && r.Agent != "claude" })
		head := "  STARTED\tSESSION"
		if workers {
			head += "\tWORKER"
		}
		head += "\tITER\tMODE\tTASK"
		if agents {
			head += "\tAGENT"
		}
		fmt.Fprintln(tw, head+"\tMODEL\tTURNS\tDURATION\tCOST\tENDED")
		for i := len(latest) - 1; i >= 0; i-- {
			r := latest[i]
			ended := endedText(r)
			session := r.Session
			if workers {
				session += "\t" + orDash(r.Worker)
			}
			task := orDash(r.TaskID)
			if agents {
				task += "\t" + orDash(r.Agent)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n",
				r.StartedAt.UTC().Format(time.RFC3339), session, r.Iteration, r.Mode, task, orDash(r.Model),
				r.Turns, r.Duration.Round(100*time.Millisecond), costCell(r), orDash(ended))
		}
		tw.Flush()
	}
	fmt.Fprintf(bw, "\ncost so far: $%.4f over %d agent %s%s\n", total, n, "session"+plural(n), costNote(all))
	return bw.Flush()
}

// endedText is the ENDED cell of a receipt: how the session ended, the
// verifier's verdict, and how its iteration ended when that was not a
// success the session's end already says — "success; tests failed", so
// that a gate, a check or a verifier that failed the work is not shown as
// a success.
func endedText(r loop.Receipt) string {
	ended := r.ExitReason
	if r.Verdict != "" {
		ended += " (verify " + r.Verdict + ")"
	}
	switch r.Result {
	case "", loop.IterDone, loop.IterSessionOK, loop.IterAlreadyClosed, loop.IterAgentTrouble, loop.IterUsageLimit:
		return ended
	}
	return ended + "; " + strings.ReplaceAll(string(r.Result), "_", " ")
}

// costSource is src with "" read as reported (receipts of Claude Code, and
// of a ralph that did not record it).
func costSource(src loop.CostSource) loop.CostSource {
	if src == "" {
		return loop.CostReported
	}
	return src
}

// costCell is a receipt's cost in the status table: "$0.0120", "~$0.0120"
// when estimated from tokens, "unknown" when neither reported nor priced.
func costCell(r loop.Receipt) string {
	switch costSource(r.CostSource) {
	case loop.CostEstimated:
		return fmt.Sprintf("~$%.4f", r.CostUSD)
	case loop.CostUnknown:
		return "unknown"
	}
	return fmt.Sprintf("$%.4f", r.CostUSD)
}

// costNote says how much of the total is estimated and how many sessions'
// cost is unknown; "" when every cost was reported.
func costNote(all []loop.Receipt) string {
	var est float64
	var estimated, unknown int
	for _, r := range all {
		switch costSource(r.CostSource) {
		case loop.CostEstimated:
			est += r.CostUSD
			estimated++
		case loop.CostUnknown:
			unknown++
		}
	}
	var parts []string
	if estimated > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f of it estimated from tokens (~ in the table)", est))
	}
	if unknown > 0 {
		parts = append(parts, fmt.Sprintf("%d %s of unknown cost", unknown, "session"+plural(unknown)))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// age is a duration for people: "45s", "3m", "2h05m", "3d4h".
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}

// holderText says who keeps a claim alive, for people: "pid 123 on this
// host", "pid 123 on HOST", "lease only".
func holderText(h loop.Holder) string {
	switch {
	case h.IsZero():
		return "lease only"
	case h.Host == loop.HostID():
		state := "alive"
		if h.Liveness() == loop.HolderGone {
			state = "gone"
		}
		return fmt.Sprintf("pid %d on this host (%s)", h.PID, state)
	}
	return fmt.Sprintf("pid %d on %s", h.PID, h.Host)
}
