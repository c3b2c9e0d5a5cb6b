// Package policy shows a loop policy of your own, unit-tested with a fake
// runner and an in-memory store: no agent process, no database, no clock.
//
// The policy is a model strategy: design work goes to opus, a task that has
// already been retried goes to opus too (a second opinion), and everything
// else runs on haiku while the recent iterations were clean, sonnet
// otherwise. Plug it in with Config.CustomStrategy.
package policy

import (
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

// Strategy picks the model of the next iteration.
var Strategy = loop.StrategyFunc(func(c loop.ModelChoice) string {
	switch {
	case strings.HasPrefix(strings.ToLower(c.Task.Title), "design"):
		return "opus"
	case c.Task.RetryCount > 0:
		return "opus"
	case len(c.History) >= 2 && clean(c.History[len(c.History)-2:]):
		return "haiku"
	default:
		return "sonnet"
	}
})

func clean(history []loop.Attempt) bool {
	for _, a := range history {
		if a.Result != loop.AttemptDone {
			return false
		}
	}
	return true
}
