package loop

import (
	"context"
	"sync"
	"time"
)

// Shared is what the workers of one parallel build share
// (ARCHITECTURE.md §5): the iteration budget and the iteration numbers, the
// cost, a usage-limit pause, the session log, and the first stop. Each
// worker is a Run whose Config.Shared points at the same Shared; what one
// worker owns — its claim, its trouble streaks, its model hint, its
// workspace — stays in its run.
//
// Iterations are numbered across the workers in the order their claims
// succeed. MaxIterations counts the iterations of all workers together: a
// worker takes a slot before it claims, and when every slot is taken or
// spent it ends (the iterations in flight finish). The first stop of a
// worker that ends the run — exit codes 1, 3, 4, 5, 7, 9 and 10 — makes
// every other worker end before its next claim, with that stop.
type Shared struct {
	mu        sync.Mutex
	maxIter   int
	maxCost   float64
	inFlight  int // slots taken by iterations under way
	counted   int // iterations that ran to their end
	numbered  int // the last iteration number handed out
	cost      float64
	paused    time.Time // no claims before then: a usage limit
	firstStop *stop
	// done is closed with the first stop that ends the run: it wakes the
	// workers waiting for a usage limit's reset.
	done chan struct{}
	slog *SessionLog
	// The AGENTS.md test command, read once for every worker
	// (ReadAgentsTest).
	agentsOnce sync.Once
	agents     AgentsTest
	agentsErr  error
	// said holds the notices said once for all workers (first).
	said map[string]bool
}

// NewShared returns the state shared by the workers of one build, with
// its budget: maxIterations iterations in all (0: DefaultMaxIterations)
// and maxCost USD (0: none). log, if not nil, is the one session log they
// write, each line naming its worker.
func NewShared(maxIterations int, maxCost float64, log *SessionLog) *Shared {
	if maxIterations <= 0 {
		maxIterations = DefaultMaxIterations
	}
	return &Shared{maxIter: maxIterations, maxCost: maxCost, slog: log, done: make(chan struct{}), said: map[string]bool{}}
}

// Iterations returns how many iterations the workers ran to their end.
func (s *Shared) Iterations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counted
}

// CostUSD returns what the workers' sessions cost.
func (s *Shared) CostUSD() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cost
}

// take takes an iteration slot, unless the workers must wait for a
// usage limit's reset first (a pause after waited, the last one this
// worker waited for): then it returns the pause's end. It returns the stop
// that ends the worker instead: another worker's stop, the cost budget,
// the iteration budget.
func (s *Shared) take(now, waited time.Time) (time.Time, *stop) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.firstStop != nil:
		f := *s.firstStop
		f.err = nil
		f.message = "stopped with another worker: " + f.message
		return time.Time{}, &f
	case s.maxCost > 0 && s.cost >= s.maxCost:
		return time.Time{}, stopWith(OutcomeBudgetExhausted, "cost budget exhausted: spent $%.4f of $%.4f", s.cost, s.maxCost)
	case s.counted+s.inFlight >= s.maxIter:
		return time.Time{}, stopWith(OutcomeLimitReached, "iteration limit reached (%d of %d run or under way)", s.counted, s.maxIter)
	}
	if until := s.paused; until.Sub(now) > 0 && until.After(waited) {
		return until, nil
	}
	s.inFlight++
	return time.Time{}, nil
}

// number numbers an iteration whose claim succeeded, across the workers.
func (s *Shared) number(int) int { return s.next() }

// spent reports whether the iteration budget is spent.
func (s *Shared) spent(int) bool { return s.limitReached() }

func (s *Shared) spend(usd float64) { s.addCost(usd) }
func (s *Shared) pause(t time.Time) { s.pauseUntil(t) }
func (s *Shared) log() *SessionLog  { return s.slog }

// agentsTest reads the AGENTS.md test command once for every worker.
func (s *Shared) agentsTest(read func() (AgentsTest, error)) (AgentsTest, error) {
	s.agentsOnce.Do(func() { s.agents, s.agentsErr = read() })
	return s.agents, s.agentsErr
}

// first reports whether what is said for the first time in this build.
func (s *Shared) first(what string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.said[what] {
		return false
	}
	s.said[what] = true
	return true
}

// next numbers an iteration whose claim succeeded.
func (s *Shared) next() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.numbered++
	return s.numbered
}

// give gives back the slot take took; counted says the iteration ran to
// its end.
func (s *Shared) give(counted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	if counted {
		s.counted++
	}
}

// limitReached reports whether the iteration budget is spent.
func (s *Shared) limitReached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counted >= s.maxIter
}

func (s *Shared) addCost(usd float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cost += usd
}

// pauseUntil makes every worker wait for a usage limit's reset.
func (s *Shared) pauseUntil(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.After(s.paused) {
		s.paused = t
	}
}

// stopped records a worker's stop; the first that ends the run is kept.
func (s *Shared) stopped(st *stop) {
	if st == nil || !endsRun(st.outcome) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstStop == nil {
		c := *st
		s.firstStop = &c
		close(s.done)
	}
}

// ended reports whether a stop ended the run.
func (s *Shared) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// sleep is sleep(ctx, d), cut short by the first stop that ends the run;
// its error is ctx's only.
func (s *Shared) sleep(ctx context.Context, sleep func(context.Context, time.Duration) error, d time.Duration) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-wctx.Done():
		}
	}()
	sleep(wctx, d)
	return ctx.Err()
}

// First returns the outcome and message of the first stop that ended the
// run, ok false when none did.
func (s *Shared) First() (o Outcome, message string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstStop == nil {
		return "", "", false
	}
	return s.firstStop.outcome, s.firstStop.message, true
}

// endsRun reports whether a worker's stop ends the whole run
// (ARCHITECTURE.md §5: exit codes 1, 3, 4, 5, 7, 9, 10).
func endsRun(o Outcome) bool {
	switch o {
	case OutcomeError, OutcomeTestGateFailed, OutcomeAgentFailed, OutcomeGitFailed,
		OutcomeFailure, OutcomeBudgetExhausted, OutcomeUsageLimit:
		return true
	}
	return false
}

// OpenSession names the session of a build whose workers share it, and
// opens its session log, the way Run does for a run of its own: cfg.Session
// if set, else the first free clock-made name in cfg.LogDir (reserved, so
// that two builds started in the same second never share logs). log is nil
// when cfg.SessionLog is off; the caller closes it.
func OpenSession(cfg Config) (session string, log *SessionLog, err error) {
	auto := cfg.Session == ""
	if _, _, err := cfg.normalize(); err != nil {
		return "", nil, err
	}
	log, err = openLog(&cfg, auto)
	return cfg.Session, log, err
}

// openLog opens the session log of a run with cfg (nil when cfg.SessionLog
// is off): a session named from the clock (auto) is first reserved
// (reserveSession, which sets cfg.Session), one named by the caller is
// used as it is.
func openLog(cfg *Config, auto bool) (*SessionLog, error) {
	var log *SessionLog
	switch {
	case auto && (cfg.SessionLog || cfg.RawLogs):
		f, err := reserveSession(cfg)
		if err != nil || f == nil {
			return nil, err
		}
		log = NewSessionLog(f)
		log.c = f
	case cfg.SessionLog:
		var err error
		if log, err = openSessionLog(logBase(cfg.Root, cfg.LogDir), SessionLogPath(cfg.LogDir, cfg.Session)); err != nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	// The event log goes with the session log. It failing to open is no
	// reason to stop a run (its write errors are not either): the error is
	// kept and Close returns it.
	ev, err := openEventLog(logBase(cfg.Root, cfg.LogDir), EventLogPath(cfg.LogDir, cfg.Session))
	if err != nil {
		ev = &EventLog{err: err}
	}
	ev.Holder = cfg.Holder
	log.events = ev
	return log, nil
}

// Stop ends the run from outside a worker's loop (a worker that could not
// start: a failing --setup): the workers end before their next claim with
// this outcome, if it is the first stop that ends the run.
func (s *Shared) Stop(o Outcome, message string) {
	s.stopped(stopWith(o, "%s", message))
}

// CheckConfig returns the error Run would return for cfg's configuration,
// changing nothing: for callers that must refuse a bad configuration before
// they do anything else (the parallel pool records the plan's integration
// branch before its workers run).
func CheckConfig(cfg Config) error {
	_, _, err := cfg.normalize()
	return err
}
