package opencode

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
)

// Session is what a session's stream said, gathered by the Decoder for
// classifying the run once it is over.
type Session struct {
	// SessionID is OpenCode's session id (every line carries it).
	SessionID string
	// Steps counts step_finish lines: the model's turns.
	Steps int
	// Reason is the last step_finish's reason ("tool-calls", "stop", …).
	Reason string
	// Stopped says that a step_finish with reason "stop" came: OpenCode's
	// last word (it has no terminal line).
	Stopped bool
	// Usage sums the step_finish tokens (reasoning counted as output).
	Usage loop.Usage
	// Cost sums the step_finish costs; 0 when the model's config has no
	// prices.
	Cost float64
	// FinalText joins the text parts of the last finished step.
	FinalText string
	// LastText is the last text part of any step.
	LastText string
	// Errors are the error lines, in order.
	Errors []Error
	// Malformed counts lines that could not be parsed.
	Malformed int
	// Rejected is the last tool call OpenCode's permissions rejected
	// (RejectedCall), "" when none was.
	Rejected string
}

// rejectedPermission is what a tool call's error says when OpenCode
// rejected its permission: `opencode run` auto-rejects every permission
// set to "ask" (no one is there to answer), and the session ends there.
const rejectedPermission = "rejected permission"

// refusal is the Text of a ClassRefused result for a session that ended
// on the permission of call ("bash (make test)"): what to change.
func refusal(call string) string {
	tool, _, _ := strings.Cut(call, " ")
	return fmt.Sprintf("OpenCode's permissions refused %s: `opencode run` rejects every permission set to \"ask\", and the session ends there. "+
		"Allow it in the \"permission\" of your OpenCode config (e.g. {\"permission\": {%q: \"allow\"}} in opencode.json), or run ralph with --sandbox", call, tool)
}

// Error is an error line: one of OpenCode's named errors.
type Error struct {
	// Name is the error's name: APIError, ProviderAuthError,
	// UnknownError, ContextOverflowError, MessageOutputLengthError, …
	Name    string
	Message string
	// StatusCode is an APIError's HTTP status (0 when the request got no
	// answer).
	StatusCode  int
	IsRetryable bool
	// ResponseBody is the API's answer to a failed request.
	ResponseBody string
	// RetryAfter is the answer's retry-after header, if it had one.
	RetryAfter string
}

// String is the error as one line of text: its message, else its name.
func (e Error) String() string {
	msg := e.Message
	if msg == "" {
		msg = e.Name
	}
	if e.StatusCode != 0 {
		msg = fmt.Sprintf("%s (HTTP %d)", msg, e.StatusCode)
	}
	return msg
}

// text is the session's final text: the text parts of its last step,
// else the last text of any step.
func (s *Session) text() string {
	if s.FinalText != "" {
		return s.FinalText
	}
	return s.LastText
}

// result is the session's account as an EventResult carries it.
func (s *Session) result() loop.RunResult {
	src := loop.CostUnknown // until Classify knows the model
	if s.Cost > 0 {
		src = loop.CostReported
	}
	return loop.RunResult{Agent: Name, Text: s.text(), SessionID: s.SessionID, Turns: s.Steps,
		Usage: s.Usage, CostUSD: s.Cost, CostSource: src, Subtype: s.Reason}
}

// Classify turns what a session said and how its process ended into a
// RunResult with its Class, from the stream's structured fields only
// (never tool output). First match wins:
//
//   - cancelled / timeout / idle_timeout: ralph stopped the agent before
//     its last step.
//   - an error line (the last one): usage_limit for a 429 whose message
//     says a usage limit or quota was hit; auth for APIError 401/403 and
//     ProviderAuthError; api_error for APIError 408, 429, 5xx, or one
//     without a status that OpenCode would retry (no connection), and for
//     "The operation timed out." (the provider's timeout option);
//     agent_error for anything else (another 4xx, an unknown model, a
//     context overflow).
//   - api_error when ralph stopped an agent that kept retrying (GaveUp).
//   - refused: no step_finish with reason "stop" after OpenCode's
//     permissions rejected a tool call (a permission set to "ask", which
//     `opencode run` rejects): every retry would end the same way.
//   - crashed: no step_finish with reason "stop", whatever the exit code.
//   - success: exit 0, or ralph stopped the agent after its last step.
//   - agent_error: a non-zero exit after the last step.
func Classify(s *Session, e agentproc.Ending) loop.RunResult {
	res := s.result()
	res.ExitCode = e.ExitCode
	res.Model = e.Model
	res.CostUSD, res.CostSource = cost(s, e.Model)
	res.IsError = true
	if c := e.Stopped(); c != "" {
		res.Class = c
		return res
	}
	if n := len(s.Errors); n > 0 {
		err := s.Errors[n-1]
		res.APIErrorStatus = err.StatusCode
		res.Subtype = err.Name
		// The error is the session's last word; an earlier step's
		// chatter is not its answer.
		res.Text = err.String()
		res.Class = errorClass(err)
		if res.Class == loop.ClassUsageLimit {
			res.UsageLimit = &loop.UsageLimit{Message: err.Message, ResetsAt: retryAfter(err.RetryAfter, e.Now)}
		}
		return res
	}
	switch {
	case e.GaveUp:
		res.Class = loop.ClassAPIError
	case !s.Stopped && s.Rejected != "":
		res.Class, res.Text = loop.ClassRefused, refusal(s.Rejected)
	case !s.Stopped:
		res.Class = loop.ClassCrashed
	case e.ExitCode == 0 || e.StoppedAfterResult:
		res.Class, res.IsError = loop.ClassSuccess, false
	default:
		res.Class = loop.ClassAgentError
	}
	return res
}

// limitRE finds a provider's words for a usage limit or quota in a 429.
var limitRE = regexp.MustCompile(`(?i)usage limit|limit reached|hit your .*limit|FreeUsageLimitError`)

// errorClass classifies an error line.
func errorClass(e Error) loop.ErrorClass {
	switch {
	case e.Name == "ProviderAuthError":
		return loop.ClassAuth
	case e.Name == "APIError":
		switch c := e.StatusCode; {
		case c == 401 || c == 403:
			return loop.ClassAuth
		case c == 429 && (limitRE.MatchString(e.Message) || limitRE.MatchString(e.ResponseBody)):
			return loop.ClassUsageLimit
		case c == 408 || c == 429 || c >= 500:
			return loop.ClassAPIError
		case c == 0 && e.IsRetryable:
			return loop.ClassAPIError
		}
	case e.Name == "UnknownError" && strings.Contains(strings.ToLower(e.Message), "timed out"):
		return loop.ClassAPIError
	}
	return loop.ClassAgentError
}

// retryAfter reads a retry-after header (seconds or an HTTP date) as a
// time; the zero time when there is none.
func retryAfter(v string, now time.Time) time.Time {
	if v == "" {
		return time.Time{}
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return now.Add(time.Duration(secs * float64(time.Second))).UTC()
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil {
		return t.UTC()
	}
	return time.Time{}
}

// cost is the session's cost and where it comes from: OpenCode's own
// when it reported one (the model's config has prices), else an estimate
// from Prices when tokens were used and the model is known, else unknown.
func cost(s *Session, model string) (float64, loop.CostSource) {
	u := s.Usage
	tokens := u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
	switch {
	case s.Cost > 0:
		return s.Cost, loop.CostReported
	case tokens > 0:
		if p, ok := Prices[model]; ok {
			return p.Cost(u), loop.CostEstimated
		}
		return 0, loop.CostUnknown
	case s.Steps > 0:
		// Steps that used no tokens cost nothing, as OpenCode says.
		return 0, loop.CostReported
	}
	return 0, loop.CostUnknown
}

// Prices are list prices in US dollars per million tokens, keyed by
// OpenCode's model ids (provider/model), for estimating the cost of a
// session whose model config has no prices (OpenCode then reports a cost
// of 0). OpenCode's own catalog (models.dev) has prices for the models of
// its built-in providers, so an estimate is needed mostly for a provider
// the user configured by hand.
//
// Anthropic: anthropic.com/pricing, as of November 2025 (CacheWrite is the
// 5-minute cache write). OpenAI: openai.com/api/pricing, August and
// November 2025 (no cache-write charge: CacheWrite is the input price).
// Google: ai.google.dev/gemini-api/docs/pricing, late 2025, prompts up to
// 200k tokens (longer ones cost more). Written down offline, not checked
// against the pages again: check them before relying on an estimate. A
// model not listed gets loop.CostUnknown. A caller may add or change
// entries before running sessions; the map is not guarded for concurrent
// writes.
var Prices = map[string]loop.Price{
	"anthropic/claude-opus-4-5":   {Input: 5, CacheRead: 0.50, CacheWrite: 6.25, Output: 25},
	"anthropic/claude-opus-4-1":   {Input: 15, CacheRead: 1.50, CacheWrite: 18.75, Output: 75},
	"anthropic/claude-sonnet-4-5": {Input: 3, CacheRead: 0.30, CacheWrite: 3.75, Output: 15},
	"anthropic/claude-sonnet-4":   {Input: 3, CacheRead: 0.30, CacheWrite: 3.75, Output: 15},
	"anthropic/claude-haiku-4-5":  {Input: 1, CacheRead: 0.10, CacheWrite: 1.25, Output: 5},
	"openai/gpt-5":                {Input: 1.25, CacheRead: 0.125, CacheWrite: 1.25, Output: 10},
	"openai/gpt-5-mini":           {Input: 0.25, CacheRead: 0.025, CacheWrite: 0.25, Output: 2},
	"openai/gpt-5-nano":           {Input: 0.05, CacheRead: 0.005, CacheWrite: 0.05, Output: 0.40},
	"openai/gpt-5-codex":          {Input: 1.25, CacheRead: 0.125, CacheWrite: 1.25, Output: 10},
	"openai/gpt-5.1":              {Input: 1.25, CacheRead: 0.125, CacheWrite: 1.25, Output: 10},
	"openai/gpt-4.1":              {Input: 2, CacheRead: 0.50, CacheWrite: 2, Output: 8},
	"google/gemini-2.5-pro":       {Input: 1.25, CacheRead: 0.125, Output: 10},
	"google/gemini-2.5-flash":     {Input: 0.30, CacheRead: 0.03, Output: 2.50},
}
