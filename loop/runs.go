package loop

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RunKind is the command a run record is of.
type RunKind string

// The kinds of run the store keeps records of (DESIGN §15).
const (
	RunKindBuild  RunKind = "build"
	RunKindPlan   RunKind = "plan"
	RunKindPrompt RunKind = "prompt"
)

// Valid reports whether k is RunKindBuild, RunKindPlan or RunKindPrompt.
func (k RunKind) Valid() bool { return k == RunKindBuild || k == RunKindPlan || k == RunKindPrompt }

// The outcome words of a run record that are not a Report's Outcome.
const (
	// RunRunning: the run has not ended; its record holds no end yet.
	RunRunning Outcome = "running"
	// RunDied: the record says running, but its holder process is gone
	// from this host (killed with kill -9, a crash, a power cut): the
	// run ended by its holder's death. A store never records it;
	// RunRecord.Settled shows it.
	RunDied Outcome = "died"
)

// A RunRecord is the store's record of one `ralph build`, `ralph plan` or
// `ralph prompt` run (DESIGN §15, "Runs are records"): begun before the
// run does anything and ended however it ends, so that a person coming
// back finds how it went. Only a run killed outright (kill -9) leaves its
// record running; Settled then shows it as RunDied.
type RunRecord struct {
	// ID is the store's, increasing with every run recorded.
	ID   int64
	Kind RunKind
	// Holder is the process that ran it (Holder.Liveness decides,
	// as for claims, whether it still runs).
	Holder    Holder
	StartedAt time.Time
	// EndedAt is zero while the run has not ended.
	EndedAt time.Time
	// Outcome is RunRunning until the run ends, then the Report's
	// Outcome (OutcomeError for a run that ended with an error and no
	// report).
	Outcome Outcome
	// ExitCode is the CLI's exit code; nil while running, and for a run
	// whose holder died.
	ExitCode *int
	// Done, Failed and Remaining are the run's scope's tasks at its end:
	// done, failed, and open or in progress.
	Done, Failed, Remaining int
	// CostUSD is what the run's agent sessions cost; Agents counts them
	// (verifier sessions included).
	CostUSD float64
	Agents  int
	// AgentNames are the agent CLIs the sessions ran on, in the order
	// they first ran ("claude", "codex": a pool that moved on); none
	// before the run ends.
	AgentNames []string
	// IntegrationTip is the integration branch's tip at the end of a build
	// that had one; "" otherwise.
	IntegrationTip string
	// Version names the ralph that ran it, as its caller gives it (the
	// CLI: its version, commit and Go release, `ralph version`'s
	// figures); "" when not given.
	Version string
}

// Running reports whether the record holds no end.
func (r RunRecord) Running() bool { return r.Outcome == RunRunning }

// Settled returns r as a person should see it: a running run whose holder
// is gone from this host (Holder.Liveness is HolderGone) has Outcome
// RunDied, ExitCode nil. A holder on another host cannot be seen from
// here: its run stays RunRunning.
func (r RunRecord) Settled() RunRecord {
	if r.Running() && r.Holder.Liveness() == HolderGone {
		r.Outcome, r.ExitCode = RunDied, nil
	}
	return r
}

// RunLine is a run record as `ralph runs --json`, `ralph status --json`'s
// last_run and ralph serve give it (RunLineOf). outcome is an Outcome
// word, "running" while the run goes on, or "died" when its holder process
// is gone from this host with the run not ended (killed with kill -9);
// exit_code is the CLI's exit code, null while running and for a run that
// died; ended_at is "" until the run ends. done, failed and remaining are
// the run's scope's tasks at its end (remaining: open or in progress);
// agents counts its agent sessions, cost_usd their cost, agent_names the
// agent CLIs they ran on (in the order each first ran); integration_tip
// is the integration branch's tip at the end of a build that had one,
// else "". holder is the process that ran it (RALPH_HOLDER's form), host
// its host identity.
type RunLine struct {
	ID             int64    `json:"id"`
	Kind           string   `json:"kind"`
	Outcome        string   `json:"outcome"`
	ExitCode       *int     `json:"exit_code"`
	Done           int      `json:"done"`
	Failed         int      `json:"failed"`
	Remaining      int      `json:"remaining"`
	CostUSD        float64  `json:"cost_usd"`
	Agents         int      `json:"agents"`
	AgentNames     []string `json:"agent_names"`
	StartedAt      string   `json:"started_at"`
	EndedAt        string   `json:"ended_at"`
	Host           string   `json:"host"`
	PID            int      `json:"pid"`
	Holder         string   `json:"holder"`
	IntegrationTip string   `json:"integration_tip"`
	Version        string   `json:"version"`
}

// RunLineOf is r, Settled, as a RunLine: times in RFC 3339 (UTC, to the
// nanosecond), "" for none.
func RunLineOf(r RunRecord) RunLine {
	r = r.Settled()
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return RunLine{ID: r.ID, Kind: string(r.Kind), Outcome: string(r.Outcome), ExitCode: r.ExitCode,
		Done: r.Done, Failed: r.Failed, Remaining: r.Remaining, CostUSD: r.CostUSD, Agents: r.Agents,
		AgentNames: append([]string{}, r.AgentNames...), StartedAt: at(r.StartedAt), EndedAt: at(r.EndedAt),
		Host: r.Holder.Host, PID: r.Holder.PID, Holder: r.Holder.String(), IntegrationTip: r.IntegrationTip,
		Version: r.Version}
}

// RunEnd is how a run ended: what RunRecorder.EndRun records.
type RunEnd struct {
	// Outcome is the run's, not RunRunning or RunDied.
	Outcome  Outcome
	ExitCode int
	// Done, Failed, Remaining, CostUSD, Agents, AgentNames and
	// IntegrationTip are RunRecord's.
	Done, Failed, Remaining int
	CostUSD                 float64
	Agents                  int
	AgentNames              []string
	IntegrationTip          string
}

// Check returns an error when e cannot end a run: its Outcome is empty,
// RunRunning or RunDied. RunRecorder.EndRun refuses such an end.
func (e RunEnd) Check() error {
	if e.Outcome == "" || e.Outcome == RunRunning || e.Outcome == RunDied {
		return fmt.Errorf("outcome %q is not an end", e.Outcome)
	}
	return nil
}

// ErrNoRun is returned by RunRecorder.EndRun for a run the store does not
// hold.
var ErrNoRun = errors.New("loop: no such run")

// RunRecorder is implemented by stores that keep a record of each run
// (DESIGN §15). It is optional, like LandingStore: the CLI records its
// build, plan and prompt runs in a store that implements it, and a
// library user may too. Package loop records none itself: a run's kind
// and its exit code are its caller's.
//
// Every method is safe for concurrent use, atomic, and returns the
// context's error, changing nothing, when ctx is cancelled.
type RunRecorder interface {
	// BeginRun records a run of r.Kind by r.Holder that starts now, as
	// RunRunning (the store's clock sets StartedAt; r's ID, times,
	// outcome and end fields are ignored), and returns its ID.
	BeginRun(ctx context.Context, r RunRecord) (int64, error)
	// EndRun records the end of run id (the store's clock sets EndedAt).
	// Ending a run that has ended already changes nothing; a run the
	// store does not hold is ErrNoRun.
	EndRun(ctx context.Context, id int64, end RunEnd) error
	// Runs returns the latest n records, newest first; all of them when
	// n <= 0. Records are as stored: Settled shows a dead holder's.
	Runs(ctx context.Context, n int) ([]RunRecord, error)
}
