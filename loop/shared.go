package loop

import (
	"sync"
)

// Shared is what the workers of one parallel build read and write once
// for all (ARCHITECTURE.md §5), beside the Budget they share: the session
// log, the AGENTS.md test command, and the notices a run says at its
// start. Each worker is a Run whose Config.Shared points at the same
// Shared; nil is a run's own. What one worker owns — its claim, its
// trouble streaks, its model hint, its workspace — stays in its run.
type Shared struct {
	slog *SessionLog
	// The AGENTS.md test command, read once for every worker
	// (ReadAgentsTest).
	agentsOnce sync.Once
	agents     AgentsTest
	agentsErr  error
	mu         sync.Mutex
	said       map[string]bool // the notices said once (first)
	// The test gate's baseline, run once for every worker.
	baseOnce sync.Once
	baseErr  error
	// The final command's rounds: one worker at a time runs it.
	final finalRounds
}

// finalRounds is what the final command's runs of one build share.
type finalRounds struct {
	mu sync.Mutex
	// rounds counts the failures that added a task; passed is set once
	// it passed on the complete plan.
	rounds int
	passed bool
}

// NewShared returns what the workers of one build share. log, if not
// nil, is the one session log they write, each line naming its worker.
func NewShared(log *SessionLog) *Shared {
	return &Shared{slog: log, said: map[string]bool{}}
}

// log is the session log the workers share (nil: the run opens its own).
func (s *Shared) log() *SessionLog {
	if s == nil {
		return nil
	}
	return s.slog
}

// agentsTest is read(), done once for the workers.
func (s *Shared) agentsTest(read func() (AgentsTest, error)) (AgentsTest, error) {
	if s == nil {
		return read()
	}
	s.agentsOnce.Do(func() { s.agents, s.agentsErr = read() })
	return s.agents, s.agentsErr
}

// baseline is run(), done once for the workers: each gets its error.
func (s *Shared) baseline(run func() error) error {
	if s == nil {
		return run()
	}
	s.baseOnce.Do(func() { s.baseErr = run() })
	return s.baseErr
}

// first reports whether what is said for the first time by the workers
// (always, for a run of its own).
func (s *Shared) first(what string) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.said[what] {
		return false
	}
	s.said[what] = true
	return true
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

// CheckConfig returns the error Run would return for cfg's configuration,
// changing nothing: for callers that must refuse a bad configuration before
// they do anything else (the parallel pool records the plan's integration
// branch before its workers run).
func CheckConfig(cfg Config) error {
	_, _, err := cfg.normalize()
	return err
}
