package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Pool is a Runner over several agents in order of preference (DESIGN
// §16; the CLI's `--agent-cli claude,codex`). Each session runs on the
// first agent that is in. An agent goes out:
//
//   - until its limit resets, when a session of its ends in a usage limit
//     (ClassUsageLimit; DefaultUsageWait from then when the agent does
//     not say when); it comes back by itself at the reset;
//   - for the rest of the run, when its credentials are refused
//     (ClassAuth: not logged in, a key refused);
//   - for the rest of the run, when its sessions have cost MaxCostPerAgent
//     (NewPool's maxCostPerAgent, if not 0). The cap is looked at before a
//     session, as Config.MaxCost is: a session in flight may pass it.
//
// A run (Run, Plan, RunPrompt) whose runner is a Pool knows it. After a
// usage limit or an auth failure it goes on at once with the next agent
// that is in (the task released and claimed again, as after a wait; no
// iteration counted, no retry used), and says so in a notice. It waits
// for a usage limit — or stops with OutcomeUsageLimit under
// UsageLimitStop, or past MaxWait — only when every agent is out, and
// then until the earliest reset. When every agent is out for good it
// stops: OutcomeBudgetExhausted when each one reached the cost cap, else
// OutcomeAgentFailed with ErrNotLoggedIn. Without Config.Verifier, a
// verifier session runs on another agent than the one that did the work
// when another is in. Receipts and raw logs name the agent of each
// session (RunResult.Agent, else PoolAgent.Name).
//
// A Pool is safe for concurrent use and keeps its state for its life:
// the workers of a parallel build share one, so an agent one worker finds
// spent is spent for all. Wrap each agent's runner (progress.DocumentRunner),
// never the Pool: a run looks for the Pool as its runner.
type Pool struct {
	maxCost float64

	mu     sync.Mutex
	agents []*poolAgent
}

// PoolAgent is one agent of a Pool.
type PoolAgent struct {
	// Name names the agent in receipts, raw logs and notices ("claude",
	// "codex"); unique in its pool.
	Name   string
	Runner Runner
}

// poolAgent is a PoolAgent and what the pool knows of it.
type poolAgent struct {
	PoolAgent
	spent float64
	// until: out until then (a usage limit); gone: out for good, and why.
	until time.Time
	gone  goneReason
}

// goneReason says why an agent is out for the rest of the run.
type goneReason int

const (
	notGone goneReason = iota
	goneAuth
	goneCost
)

// ErrPoolOut is what Pool.Run returns when every agent of the pool is out
// (see Pool). A run never returns it: it waits or stops.
var ErrPoolOut = errors.New("loop: every agent of the pool is out")

// NewPool returns a pool of agents, in order of preference, whose
// sessions may cost up to maxCostPerAgent US dollars each in total (0: no
// cap). It needs at least one agent, each named once and with a Runner.
func NewPool(maxCostPerAgent float64, agents ...PoolAgent) (*Pool, error) {
	if len(agents) == 0 {
		return nil, fmt.Errorf("%w: a pool needs an agent", ErrConfig)
	}
	if maxCostPerAgent < 0 {
		return nil, fmt.Errorf("%w: a pool's cost cap of $%v is below zero", ErrConfig, maxCostPerAgent)
	}
	p := &Pool{maxCost: maxCostPerAgent}
	for i, a := range agents {
		switch {
		case strings.TrimSpace(a.Name) == "":
			return nil, fmt.Errorf("%w: agent %d of the pool has no name", ErrConfig, i+1)
		case a.Runner == nil:
			return nil, fmt.Errorf("%w: agent %s of the pool has no runner", ErrConfig, a.Name)
		case slices.ContainsFunc(agents[:i], func(b PoolAgent) bool { return b.Name == a.Name }):
			return nil, fmt.Errorf("%w: agent %s is in the pool twice", ErrConfig, a.Name)
		}
		p.agents = append(p.agents, &poolAgent{PoolAgent: a})
	}
	return p, nil
}

// Names lists the pool's agents in order of preference.
func (p *Pool) Names() []string {
	var names []string
	for _, a := range p.agents {
		names = append(names, a.Name)
	}
	return names
}

// Run runs req on the first agent that is in and books the session's
// end; ErrPoolOut when every agent is out. A run calls the agents itself
// (it names each session's raw log by its agent): Run is for programs
// that use a Pool outside one.
func (p *Pool) Run(ctx context.Context, req RunRequest) (RunResult, error) {
	a := p.pick(time.Now(), "")
	if a == nil {
		return RunResult{}, ErrPoolOut
	}
	res, err := a.Runner.Run(ctx, req)
	if err == nil {
		res, _ = p.settle(time.Now(), a, res)
	}
	return res, err
}

// in reports whether a is in at now; p.mu held.
func (p *Pool) in(a *poolAgent, now time.Time) bool {
	return a.gone == notGone && !a.until.After(now)
}

// pick returns the first agent in at now, another than avoid when one is
// in; nil when every agent is out.
func (p *Pool) pick(now time.Time, avoid string) *poolAgent {
	p.mu.Lock()
	defer p.mu.Unlock()
	var fallback *poolAgent
	for _, a := range p.agents {
		if !p.in(a, now) {
			continue
		}
		if a.Name != avoid {
			return a
		}
		fallback = a
	}
	return fallback
}

// settle books the end of a session a ran at now: its cost, and the
// agent out after a usage limit, refused credentials or its cost cap. It
// returns res naming its agent, and, when this session took the agent to
// its cost cap, a sentence that says so.
func (p *Pool) settle(now time.Time, a *poolAgent, res RunResult) (RunResult, string) {
	if res.Agent == "" {
		res.Agent = a.Name
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	a.spent += res.CostUSD
	switch res.Class {
	case ClassUsageLimit:
		reset := now.Add(DefaultUsageWait)
		if res.UsageLimit != nil && !res.UsageLimit.ResetsAt.IsZero() {
			reset = res.UsageLimit.ResetsAt
		}
		if reset.After(a.until) {
			a.until = reset
		}
	case ClassAuth:
		a.gone = goneAuth
	}
	if p.maxCost > 0 && a.spent >= p.maxCost && a.gone == notGone {
		a.gone = goneCost
		return res, fmt.Sprintf("%s reached its cost cap ($%.4f of $%.4f)", a.Name, a.spent, p.maxCost)
	}
	return res, ""
}

// poolState is what a run needs to know of its pool at a moment.
type poolState struct {
	// next is the agent a session would run on now; "" when every one is
	// out.
	next string
	// resetsAt is the earliest reset of an agent out for a usage limit;
	// zero when none is (every agent is out for good, or next is in).
	resetsAt time.Time
	// end, with every agent out for good, is the stop that ends the run.
	end *stop
}

// state is the pool's state at now.
func (p *Pool) state(now time.Time) poolState {
	p.mu.Lock()
	defer p.mu.Unlock()
	var st poolState
	for _, a := range p.agents {
		switch {
		case p.in(a, now):
			if st.next == "" {
				st.next = a.Name
			}
		case a.gone == notGone && (st.resetsAt.IsZero() || a.until.Before(st.resetsAt)):
			st.resetsAt = a.until
		}
	}
	if st.next != "" {
		st.resetsAt = time.Time{}
		return st
	}
	if st.resetsAt.IsZero() {
		st.end = p.endStop()
	}
	return st
}

// endStop is the stop of a run whose every agent is out for good; p.mu
// held.
func (p *Pool) endStop() *stop {
	var why []string
	allCost := true
	for _, a := range p.agents {
		if a.gone == goneCost {
			why = append(why, fmt.Sprintf("%s spent $%.4f of $%.4f", a.Name, a.spent, p.maxCost))
			continue
		}
		allCost = false
		why = append(why, a.Name+" is not logged in, or its credentials were refused")
	}
	if allCost {
		return stopWith(OutcomeBudgetExhausted, "cost budget exhausted: every agent reached its cost cap (%s)", strings.Join(why, "; "))
	}
	s := stopWith(OutcomeAgentFailed, "no agent can run: %s; %s", strings.Join(why, "; "), LoginHint)
	s.cause = ErrNotLoggedIn
	return s
}

// limitReason is why a run releases its claim after a usage limit: to go
// on with its pool's next agent, or to wait for the reset.
func (r *run) limitReason() string {
	if r.pool != nil {
		if next := r.pool.state(r.cfg.Now()).next; next != "" {
			return "usage limit: going on with " + next
		}
	}
	return "usage limit: waiting for reset"
}
