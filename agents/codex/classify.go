package codex

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
)

// Session gathers what a session's stream said, event by event, for
// classifying the run once it is over. The zero value is ready to use.
type Session struct {
	SessionID string
	// LastText is the last agent_message: the final text of a session.
	LastText string
	// Turns counts turn.started lines (one per `codex exec`).
	Turns int
	// Result is the result of the last turn.completed or turn.failed, if
	// one came.
	Result *loop.RunResult
	// Limit is the last usage limit an error line reported.
	Limit *loop.UsageLimit
	// Retries counts "Reconnecting..." lines; Unreachable counts those
	// that say the network is down ("waiting for network"), in a row.
	Retries, Unreachable int
	// LastError is the last top-level error line's message.
	LastError string
	// Malformed counts lines that could not be parsed.
	Malformed int
}

// Add records one event.
func (s *Session) Add(ev loop.Event) {
	if ev.SessionID != "" && s.SessionID == "" {
		s.SessionID = ev.SessionID
	}
	if ev.Kind != loop.EventStderr && (ev.Kind != loop.EventSystem || ev.Subtype != SubtypeRetry) {
		s.Unreachable = 0 // not in a row any more
	}
	switch ev.Kind {
	case loop.EventInit:
		s.SessionID = ev.SessionID
	case loop.EventText:
		s.LastText = ev.Text
	case loop.EventSystem:
		switch ev.Subtype {
		case SubtypeTurnStarted:
			s.Turns++
		case SubtypeRetry:
			s.Retries++
			s.LastError = ev.Text
			if Unreachable(ev.Text) {
				s.Unreachable++
			}
		case SubtypeError:
			s.LastError = ev.Text
		}
	case loop.EventRateLimit:
		if ev.UsageLimit != nil {
			ul := *ev.UsageLimit
			s.Limit = &ul
		}
		s.LastError = ev.Text
	case loop.EventResult:
		if ev.Result != nil {
			r := *ev.Result
			s.Result = &r
		}
	case loop.EventMalformed:
		s.Malformed++
	}
}

// Unreachable reports whether a "Reconnecting..." message says that the
// API cannot be reached at all (connection refused, no route, DNS), the
// case in which Codex retries for ever.
func Unreachable(msg string) bool {
	return strings.HasPrefix(msg, "Reconnecting...") && strings.Contains(msg, "waiting for network")
}

var (
	statusRE = regexp.MustCompile(`(?:unexpected status|last status:)\s+(\d{3})\b`)
	authRE   = regexp.MustCompile(`(?i)\b(?:401|403)\b|unauthorized|forbidden|invalid_api_key|incorrect api key|not logged in|log ?in again|authentication|missing env var`)
	apiRE    = regexp.MustCompile(`(?i)exceeded retry limit|high demand|stream disconnected|idle timeout|server overloaded|\boverloaded\b|error sending request|connection (?:refused|reset|closed)|timed out|temporar(?:y|ily) unavailable|reconnecting|internal server error|bad gateway|service unavailable`)
)

// Classify turns what a session said and how its process ended into a
// RunResult with its Class, with the same precedence as claude.Classify:
// a stop ordered by ralph (cancel, wall or idle timeout) wins; then a
// usage limit; then the turn's end (turn.completed, turn.failed); then no
// end at all, which is a crash whatever the exit code — unless ralph
// stopped an agent that could not reach its API (Ending.GaveUp),
// which is an API error.
//
// A failed turn's message is the only account of what failed (Codex
// reports no status field): "unexpected status 401/403" and login
// wording make ClassAuth; retry exhaustion ("exceeded retry limit, last
// status: 429", the "high demand" message of a 5xx), a broken or idle
// stream make ClassAPIError; a usage-limit message makes ClassUsageLimit;
// anything else (a 400, an unknown model) ClassAgentError.
func Classify(s *Session, e agentproc.Ending) loop.RunResult {
	var res loop.RunResult
	if s.Result != nil {
		res = *s.Result
	}
	res.Agent = Name
	res.ExitCode = e.ExitCode
	res.SessionID = s.SessionID
	res.Turns = s.Turns
	if s.Result == nil || !res.IsError {
		// A completed turn's text is its last agent_message; a failed
		// turn's is its error message.
		res.Text = s.LastText
	}
	if s.Result == nil && e.ExitCode != 0 {
		res.IsError = true
	}
	if m := statusRE.FindStringSubmatch(res.Text); res.IsError && m != nil {
		res.APIErrorStatus, _ = strconv.Atoi(m[1])
	}

	if c := e.Stopped(); c != "" {
		res.Class, res.IsError = c, true
		return res
	}

	if ul := usageLimit(s); ul != nil {
		res.Class, res.UsageLimit, res.IsError = loop.ClassUsageLimit, ul, true
		return res
	}
	if s.Result == nil {
		res.Class = loop.ClassCrashed
		if e.GaveUp {
			res.Class, res.IsError = loop.ClassAPIError, true
			if res.Text == "" {
				res.Text = s.LastError
			}
		}
		return res
	}
	switch r := s.Result; {
	case !r.IsError && (e.ExitCode == 0 || e.StoppedAfterResult):
		res.Class = loop.ClassSuccess
	case !r.IsError:
		res.Class, res.IsError = loop.ClassAgentError, true // a good turn, then a non-zero exit
	case res.APIErrorStatus == 401 || res.APIErrorStatus == 403 || (res.APIErrorStatus == 0 && authRE.MatchString(r.Text)):
		res.Class = loop.ClassAuth
	case res.APIErrorStatus == 408 || res.APIErrorStatus == 429 || res.APIErrorStatus >= 500:
		res.Class = loop.ClassAPIError
	case res.APIErrorStatus == 0 && apiRE.MatchString(r.Text):
		res.Class = loop.ClassAPIError
	default:
		res.Class = loop.ClassAgentError
	}
	return res
}

// usageLimit returns the usage limit the session hit, or nil: the failed
// turn's, else one an error line reported if the turn then failed or
// never ended.
func usageLimit(s *Session) *loop.UsageLimit {
	if r := s.Result; r != nil {
		if !r.IsError {
			return nil
		}
		if r.UsageLimit != nil {
			ul := *r.UsageLimit
			return &ul
		}
	}
	if s.Limit != nil {
		ul := *s.Limit
		return &ul
	}
	return nil
}

// Prices are OpenAI's list prices in US dollars per million tokens, by
// model id, for estimating the cost of a session (Codex reports none).
// OpenAI charges no cache writes: CacheWrite is the input price. Reasoning
// tokens are billed as output, and Codex counts them in output_tokens.
//
// gpt-5, gpt-5-mini, gpt-5-nano, gpt-5-codex, gpt-5.1 and gpt-5.1-codex
// are OpenAI's published list prices (openai.com/api/pricing, August and
// November 2025). gpt-5.4 (and mini, nano) and gpt-5.5 are the list prices
// as reported in 2026 by price trackers quoting OpenAI's pricing page
// (developers.openai.com/api/docs/pricing; for gpt-5.5 checked against
// two reports of June 2026): standard tier, prompts under 272K tokens
// (longer ones cost about twice as much). The pinned Codex's own catalog
// also knows gpt-5.6-*, gpt-6-* and gpt-6.1-* slugs, whose prices were not
// published when this table was written: their cost is CostUnknown. Check
// the pricing page before relying on an estimate; set Prices[id] to
// override or add a model.
var Prices = map[string]loop.Price{
	"gpt-5":              {Input: 1.25, CacheRead: 0.125, CacheWrite: 1.25, Output: 10},
	"gpt-5-codex":        {Input: 1.25, CacheRead: 0.125, CacheWrite: 1.25, Output: 10},
	"gpt-5-mini":         {Input: 0.25, CacheRead: 0.025, CacheWrite: 0.25, Output: 2},
	"gpt-5-nano":         {Input: 0.05, CacheRead: 0.005, CacheWrite: 0.05, Output: 0.40},
	"gpt-5.1":            {Input: 1.25, CacheRead: 0.125, CacheWrite: 1.25, Output: 10},
	"gpt-5.1-codex":      {Input: 1.25, CacheRead: 0.125, CacheWrite: 1.25, Output: 10},
	"gpt-5.1-codex-mini": {Input: 0.25, CacheRead: 0.025, CacheWrite: 0.25, Output: 2},
	"gpt-5.4":            {Input: 2.50, CacheRead: 0.25, CacheWrite: 2.50, Output: 15},
	"gpt-5.4-mini":       {Input: 0.75, CacheRead: 0.075, CacheWrite: 0.75, Output: 4.50},
	"gpt-5.4-nano":       {Input: 0.20, CacheRead: 0.02, CacheWrite: 0.20, Output: 1.25},
	"gpt-5.5":            {Input: 5, CacheRead: 0.50, CacheWrite: 5, Output: 30},
}

// Estimate sets res.CostUSD and res.CostSource from Prices and res.Usage
// for model: CostEstimated for a model in the table, CostUnknown (cost 0)
// otherwise.
func Estimate(res *loop.RunResult, model string) {
	if p, ok := Prices[model]; ok {
		res.CostUSD, res.CostSource = p.Cost(res.Usage), loop.CostEstimated
		return
	}
	res.CostUSD, res.CostSource = 0, loop.CostUnknown
}
