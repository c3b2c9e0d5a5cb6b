package loop

import (
	"fmt"
	"strings"
)

// The model aliases the strategies choose from.
const (
	ModelHaiku  = "haiku"
	ModelSonnet = "sonnet"
	ModelOpus   = "opus"
)

// Strategy names, as `--strategy` takes them.
const (
	StrategyFixed           = "fixed"
	StrategyCostOptimized   = "cost-optimized"
	StrategyEscalate        = "escalate"
	StrategyPlanThenExecute = "plan-then-execute"
)

// StrategyNames lists the built-in strategies.
func StrategyNames() []string {
	return []string{StrategyFixed, StrategyCostOptimized, StrategyEscalate, StrategyPlanThenExecute}
}

// AttemptResult says how an earlier iteration went, for strategies.
type AttemptResult string

// The results a strategy sees in its history.
const (
	AttemptDone         AttemptResult = "done"          // the task was completed
	AttemptTaskFailed   AttemptResult = "task_failed"   // the agent reported <task-failed>
	AttemptTaskTrouble  AttemptResult = "task_trouble"  // no sigil, wrong id, verification failed
	AttemptAgentTrouble AttemptResult = "agent_trouble" // crash, error, timeout
	AttemptGateTrouble  AttemptResult = "gate_trouble"  // tests or git failed
)

// Distress reports whether the attempt went wrong in a way that a stronger
// model might fix.
func (r AttemptResult) Distress() bool { return r != AttemptDone }

// Attempt is one earlier iteration of this run.
type Attempt struct {
	Iteration int
	TaskID    string
	Model     string
	// Hinted is set when Model came from a <next-model> hint.
	Hinted bool
	Result AttemptResult
}

// ModelChoice is what a strategy decides from.
type ModelChoice struct {
	// Iteration is the iteration about to run, from 1.
	Iteration int
	// Task is the task about to run (zero in peek mode).
	Task Task
	// TaskLogs is the task's log, oldest first (nil in peek mode).
	TaskLogs []LogEntry
	// History lists this run's earlier iterations, oldest first.
	History []Attempt
}

// Strategy picks the model of the next iteration. A <next-model> hint
// overrides it for one iteration; the loop handles that, not the strategy.
type Strategy interface {
	Model(c ModelChoice) string
}

// StrategyFunc adapts a function to the Strategy interface.
type StrategyFunc func(c ModelChoice) string

// Model calls f(c).
func (f StrategyFunc) Model(c ModelChoice) string { return f(c) }

// ParseStrategy returns the named built-in strategy. An empty name means
// fixed when model is set and cost-optimized otherwise. Only fixed takes a
// model (empty: sonnet); a model with another strategy is an error.
func ParseStrategy(name, model string) (Strategy, error) {
	if name == "" {
		if model != "" {
			name = StrategyFixed
		} else {
			name = StrategyCostOptimized
		}
	}
	if model != "" && name != StrategyFixed {
		return nil, fmt.Errorf("model %q given with strategy %s (only fixed takes a model)", model, name)
	}
	switch name {
	case StrategyFixed:
		if model == "" {
			model = ModelSonnet
		}
		return Fixed(model), nil
	case StrategyCostOptimized:
		return StrategyFunc(costOptimized), nil
	case StrategyEscalate:
		return StrategyFunc(escalate), nil
	case StrategyPlanThenExecute:
		return StrategyFunc(planThenExecute), nil
	}
	return nil, fmt.Errorf("unknown strategy %q (want one of %s)", name, strings.Join(StrategyNames(), ", "))
}

// Fixed always picks model.
func Fixed(model string) Strategy {
	return StrategyFunc(func(ModelChoice) string { return model })
}

// cleanStreakForHaiku is how many clean completions in a row let
// cost-optimized drop to haiku.
const cleanStreakForHaiku = 3

// recentLogWindow is how many of the task's latest log entries
// cost-optimized looks at for error signals.
const recentLogWindow = 5

// costOptimized: opus when the task's recent log shows trouble (a fail,
// retry, expired lease, or a release other than ReasonLoopStopped) or it has
// been retried; haiku after 3+
// clean completions in a row in this run; sonnet otherwise.
func costOptimized(c ModelChoice) string {
	if c.Task.RetryCount > 0 || errorSignals(c.TaskLogs) {
		return ModelOpus
	}
	clean := 0
	for i := len(c.History) - 1; i >= 0 && c.History[i].Result == AttemptDone; i-- {
		clean++
	}
	if clean >= cleanStreakForHaiku {
		return ModelHaiku
	}
	return ModelSonnet
}

func errorSignals(logs []LogEntry) bool {
	start := max(0, len(logs)-recentLogWindow)
	for _, e := range logs[start:] {
		switch e.Kind {
		case LogFail, LogRetry, LogLeaseExpired:
			return true
		case LogRelease:
			// A run that was stopped (Ctrl-C) is no sign of trouble.
			if e.Message != ReasonLoopStopped {
				return true
			}
		}
	}
	return false
}

var ladder = []string{ModelHaiku, ModelSonnet, ModelOpus}

func rung(model string) int {
	for i, m := range ladder {
		if m == model {
			return i
		}
	}
	return -1
}

// escalate: haiku first; each attempt in distress moves one rung up
// (haiku → sonnet → opus); it never moves down, except that an iteration
// run on a hinted model resets the rung to that model's.
func escalate(c ModelChoice) string {
	level := 0
	for _, a := range c.History {
		if a.Hinted {
			if r := rung(a.Model); r >= 0 {
				level = r
			}
		}
		if a.Result.Distress() {
			level = min(level+1, len(ladder)-1)
		}
	}
	return ladder[level]
}

// planThenExecute: opus for the first iteration, sonnet after.
func planThenExecute(c ModelChoice) string {
	if c.Iteration <= 1 {
		return ModelOpus
	}
	return ModelSonnet
}
