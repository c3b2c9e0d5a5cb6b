package gemini

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
)

// Session gathers what a session's stream said, event by event, for
// classifying the run once it is over. The zero value is ready to use.
type Session struct {
	SessionID string
	Model     string
	// LastText is the last assistant message (its chunks joined).
	LastText string
	// Result is the result line, if one came.
	Result *loop.RunResult
	// Malformed counts lines that could not be parsed.
	Malformed int
}

// Add records one event.
func (s *Session) Add(ev loop.Event) {
	switch ev.Kind {
	case loop.EventInit:
		s.SessionID, s.Model = ev.SessionID, ev.Model
	case loop.EventText:
		s.LastText = ev.Text
	case loop.EventResult:
		if ev.Result != nil {
			r := *ev.Result
			s.Result = &r
		}
	case loop.EventMalformed:
		s.Malformed++
	}
}

// The Gemini CLI's own exit codes (packages/cli FatalError subclasses).
const (
	exitAuth      = 41  // FatalAuthenticationError
	exitTurnLimit = 53  // FatalTurnLimitedError
	exitCancelled = 130 // FatalCancellationError
)

var (
	// retryAfterRE finds the delay the CLI quotes from the API's RetryInfo:
	// "Suggested retry after 3600s.".
	retryAfterRE = regexp.MustCompile(`Suggested retry after ([0-9.]+)(ms|s)\b`)
	// dailyQuotaRE matches the CLI's words for a spent per-day quota
	// (a QuotaFailure whose quotaId says PerDay or Daily).
	dailyQuotaRE = regexp.MustCompile(`(?i)exhausted your daily quota|quota.*\bper ?day\b|\bdaily (request )?(quota|limit)\b`)
	// zeroLimitRE: a quota of zero for the model (the free tier does not
	// offer it); only a plan change helps.
	zeroLimitRE = regexp.MustCompile(`(?i)limit:\s*0(?:[^0-9.]|$)`)
	// maxTurnsRE is FatalTurnLimitedError's message.
	maxTurnsRE = regexp.MustCompile(`(?i)max(imum)? session turns`)
)

// terminalQuotaDelay is the delay above which the pinned CLI takes a 429
// for a quota that will not come back soon (its MAX_RETRYABLE_DELAY_SECONDS):
// it does not retry, and neither should ralph before then.
const terminalQuotaDelay = 300 * time.Second

// pacific is where the Gemini API's per-day quotas reset at midnight.
var pacific = func() *time.Location {
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		return nil
	}
	return loc
}()

// Classify turns what a session said and how its process ended into a
// RunResult with its Class. It reads the result line's status, its error
// message and the exit code (the HTTP status of the final API error mod
// 256, or one of the CLI's own codes) — never tool output.
//
// The order of the checks: a stop ordered by ralph (cancel, wall or idle
// timeout) wins; then a usage limit; then no result line, a crash whatever
// the exit code (the CLI exits 0 with no result on SIGTERM); then the
// result line.
func Classify(s *Session, e agentproc.Ending) loop.RunResult {
	var res loop.RunResult
	if s.Result != nil {
		res = *s.Result
	}
	res.Agent = Name
	res.ExitCode = e.ExitCode
	if res.SessionID == "" {
		res.SessionID = s.SessionID
	}
	res.Model = s.Model
	if s.Result == nil || !res.IsError {
		// The final text is the last assistant message; an error
		// result's text is its error message.
		res.Text = s.LastText
	}
	if s.Result == nil {
		// No stats came: what the session used is not known.
		res.IsError = true
		res.CostSource = loop.CostUnknown
	}
	if res.IsError && res.APIErrorStatus == 0 && e.ExitCode >= 144 && e.ExitCode <= 255 && strings.Contains(res.Text, "[API Error") {
		// 400…511 mod 256: the exit code is the final error's HTTP status.
		res.APIErrorStatus = e.ExitCode + 256
	}

	if c := e.Stopped(); c != "" {
		res.Class, res.IsError = c, true
		return res
	}
	if s.Result == nil {
		res.Class = loop.ClassCrashed
		return res
	}
	if ul := usageLimit(&res, e.Now); ul != nil {
		res.Class, res.UsageLimit, res.IsError = loop.ClassUsageLimit, ul, true
		return res
	}
	switch r := &res; {
	case !r.IsError && (e.ExitCode == 0 || e.StoppedAfterResult):
		r.Class = loop.ClassSuccess
	case r.IsError && (r.TerminalReason == "FatalTurnLimitedError" || e.ExitCode == exitTurnLimit || maxTurnsRE.MatchString(r.Text)):
		r.Class = loop.ClassMaxTurns
	case r.APIErrorStatus == 401 || r.APIErrorStatus == 403 || e.ExitCode == exitAuth:
		r.Class = loop.ClassAuth
	case r.APIErrorStatus == 408 || r.APIErrorStatus == 429 || r.APIErrorStatus == 499 || r.APIErrorStatus >= 500:
		r.Class = loop.ClassAPIError
	case r.APIErrorStatus == 0 && strings.HasPrefix(r.Text, "[API Error"):
		// No status: the stream broke or timed out ("[API Error:
		// terminated]" after about 300 s of a stalled stream).
		r.Class = loop.ClassAPIError
	default:
		// An error result (another 4xx such as an unknown model, an
		// invalid stream, a fatal tool error), or a non-zero exit after
		// a good result.
		r.IsError = true
		r.Class = loop.ClassAgentError
	}
	return res
}

// usageLimit returns the usage limit an error result reports, or nil: a
// 429 whose message says a per-day quota is spent (the API's QuotaFailure
// names a PerDay quota; the CLI then says "You have exhausted your daily
// quota on this model."), a quota limit of 0 for the model, or a retry
// delay longer than 5 minutes ("Suggested retry after 3600s.", which the
// CLI does not retry either). A 429 with a shorter delay or none is rate
// limiting that passes: an api_error, not a usage limit. The reset time is
// now plus the delay, else the next midnight Pacific time for a daily
// quota (when the API's daily quotas reset), else unknown.
func usageLimit(r *loop.RunResult, now time.Time) *loop.UsageLimit {
	if !r.IsError || r.APIErrorStatus != 429 {
		return nil
	}
	var delay time.Duration
	if m := retryAfterRE.FindStringSubmatch(r.Text); m != nil {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil {
			unit := time.Second
			if m[2] == "ms" {
				unit = time.Millisecond
			}
			delay = time.Duration(v * float64(unit))
		}
	}
	daily := dailyQuotaRE.MatchString(r.Text)
	if !daily && delay <= terminalQuotaDelay && !zeroLimitRE.MatchString(r.Text) {
		return nil
	}
	ul := &loop.UsageLimit{Message: strings.TrimSpace(r.Text)}
	switch {
	case delay > 0 && !now.IsZero():
		ul.ResetsAt = now.Add(delay).UTC()
	case daily && pacific != nil && !now.IsZero():
		ul.Type = "daily"
		p := now.In(pacific)
		ul.ResetsAt = time.Date(p.Year(), p.Month(), p.Day()+1, 0, 0, 0, 0, pacific).UTC()
	}
	if daily {
		ul.Type = "daily"
	}
	return ul
}
