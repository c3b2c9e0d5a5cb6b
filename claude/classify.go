package claude

import (
	"fmt"
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
	// LastText is the last assistant text block, the final text of a
	// session without a result line (or with a result of no text). A
	// result line with a text supersedes it: it is emptied then, so that
	// a huge answer is not kept twice.
	LastText string
	// Result is the result line, if one came.
	Result *loop.RunResult
	// Rejected is the last rejected rate_limit_event, if any.
	Rejected *loop.UsageLimit
	// Malformed counts lines that could not be parsed.
	Malformed int
}

// Add records one event.
func (s *Session) Add(ev loop.Event) {
	if ev.SessionID != "" && s.SessionID == "" {
		s.SessionID = ev.SessionID
	}
	switch ev.Kind {
	case loop.EventInit:
		s.SessionID = ev.SessionID
		s.Model = ev.Model
	case loop.EventText:
		s.LastText = ev.Text
	case loop.EventRateLimit:
		if ev.Subtype == "rejected" && ev.UsageLimit != nil {
			ul := *ev.UsageLimit
			s.Rejected = &ul
		}
	case loop.EventResult:
		if ev.Result != nil {
			r := *ev.Result
			s.Result = &r
			if r.Text != "" {
				s.LastText = ""
			}
		}
	case loop.EventMalformed:
		s.Malformed++
	}
}

// Classify turns what a session said and how its process ended into a
// RunResult with its Class. It reads structured fields only: the result
// line's is_error, subtype, terminal_reason, api_error_status and text, and
// rate_limit_event statuses — never tool output; and, for a session that
// printed nothing on its stream, its exit code and standard error.
//
// The order of the checks: a stop ordered by ralph (cancel, wall or idle
// timeout) wins, since the agent's own account of an interrupted run (exit
// 0 and error_during_execution after SIGINT) says nothing about why; then a
// usage limit; then the result line; then no result at all, which is a
// crash whatever the exit code.
func Classify(s *Session, e agentproc.Ending) loop.RunResult {
	var res loop.RunResult
	if s.Result != nil {
		res = *s.Result
	}
	res.ExitCode = e.ExitCode
	if res.SessionID == "" {
		res.SessionID = s.SessionID
	}
	res.Model = s.Model
	if res.Text == "" && (s.Result == nil || !res.IsError) {
		// The final text is the result's, else the last assistant text;
		// an error result's empty text is not replaced by chatter.
		res.Text = s.LastText
	}
	if s.Result == nil && e.ExitCode != 0 {
		res.IsError = true
	}

	if c := e.Stopped(); c != "" {
		res.Class, res.IsError = c, true
		return res
	}

	if ul := usageLimit(s, e.Now); ul != nil {
		res.Class = loop.ClassUsageLimit
		res.UsageLimit = ul
		res.IsError = true
		return res
	}
	if s.Result == nil {
		res.Class = loop.ClassCrashed
		if refusedAsRoot(s, e) {
			res.Class, res.Text = loop.ClassRefused, RootRefusal
		}
		return res
	}
	switch r := s.Result; {
	case !r.IsError && (e.ExitCode == 0 || e.StoppedAfterResult):
		res.Class = loop.ClassSuccess
	case r.Subtype == "error_max_turns" || r.TerminalReason == "max_turns":
		res.Class = loop.ClassMaxTurns
	case r.APIErrorStatus == 401 || r.APIErrorStatus == 403 || r.IsError && notLoggedIn(res.Text):
		res.Class = loop.ClassAuth
	case r.APIErrorStatus == 408 || r.APIErrorStatus == 429 || r.APIErrorStatus >= 500:
		res.Class = loop.ClassAPIError
	case r.APIErrorStatus == 0 && r.TerminalReason == "api_error":
		// No status: the request timed out or the connection broke.
		res.Class = loop.ClassAPIError
	default:
		// is_error, another 4xx (an unknown model, a bad request), or a
		// non-zero exit after a good result.
		res.IsError = true
		res.Class = loop.ClassAgentError
	}
	return res
}

// notLoggedIn reports whether a result's text is Claude Code's (2.1.330)
// "Not logged in · Please run /login": no API key and no login, a result
// with is_error, no API status and terminal reason api_error.
func notLoggedIn(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), "Not logged in")
}

// rootRefusalLine is how Claude Code (2.1.330) refuses
// --dangerously-skip-permissions run as root (effective uid 0) when
// IS_SANDBOX is not "1" (nor CLAUDE_CODE_BUBBLEWRAP set): this line alone
// on standard error, then exit code 1, before any stream line.
const rootRefusalLine = "--dangerously-skip-permissions cannot be used with root/sudo privileges"

// RootRefusal is the Text of a ClassRefused result: Claude Code's refusal
// to skip permissions as root, and what to change.
const RootRefusal = "Claude Code refuses to skip permissions as root outside a sandbox " +
	"(\"--dangerously-skip-permissions cannot be used with root/sudo privileges\"): " +
	"run ralph with --sandbox, or as a user other than root, " +
	"or with IS_SANDBOX=1 in its environment if this machine is itself a sandbox (a container or VM you can throw away)"

// refusedAsRoot reports whether a session that ended without a result was
// Claude Code's refusal to skip permissions as root: exit code 1, nothing
// at all on its stream, and the refusal as a whole line of its standard
// error (which carries the CLI's own messages, never tool output).
func refusedAsRoot(s *Session, e agentproc.Ending) bool {
	if e.ExitCode != 1 || s.Result != nil || s.SessionID != "" || s.LastText != "" || s.Rejected != nil || s.Malformed > 0 {
		return false
	}
	for _, l := range strings.Split(e.Stderr, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), rootRefusalLine) {
			return true
		}
	}
	return false
}

var (
	legacyLimitRE = regexp.MustCompile(`Claude AI usage limit reached\|(\d+)`)
	limitTextRE   = regexp.MustCompile(`(?i)\bhit your\b.*\blimit\b|\busage limit\b|\blimit reached\b`)
	resetsRE      = regexp.MustCompile(`(?i)\bresets\s+(?:at\s+)?([^()·]+?)\s*\(([^()]+)\)`)
)

// usageLimit returns the usage limit the session hit, or nil.
func usageLimit(s *Session, now time.Time) *loop.UsageLimit {
	var ul *loop.UsageLimit
	if s.Rejected != nil {
		r := *s.Rejected
		ul = &r
	}
	if r := s.Result; r != nil && r.IsError && r.UsageLimit != nil && ul == nil {
		ul = &loop.UsageLimit{}
	}
	if r := s.Result; r != nil && r.IsError {
		if m := legacyLimitRE.FindStringSubmatch(r.Text); m != nil {
			if ul == nil {
				ul = &loop.UsageLimit{}
			}
			if secs, err := strconv.ParseInt(m[1], 10, 64); err == nil && ul.ResetsAt.IsZero() {
				ul.ResetsAt = time.Unix(secs, 0).UTC()
			}
			ul.Message = strings.TrimSpace(r.Text)
		} else if (r.APIErrorStatus == 429 || ul != nil) && limitTextRE.MatchString(r.Text) {
			if ul == nil {
				ul = &loop.UsageLimit{}
			}
			if ul.ResetsAt.IsZero() {
				ul.ResetsAt = ParseResetText(r.Text, now)
			}
			ul.Message = strings.TrimSpace(r.Text)
		}
	}
	return ul
}

// ParseResetText finds "resets <time> (<zone>)" in a usage-limit message
// ("You've hit your session limit · resets 6:30pm (UTC)") and returns the
// next such time after now, in UTC. Times may carry a date ("resets Nov 23,
// 5am (Europe/Paris)"). It returns the zero time when there is no reset
// text or it cannot be read (an unknown zone, an odd format): the caller
// then waits its default.
func ParseResetText(text string, now time.Time) time.Time {
	m := resetsRE.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}
	}
	loc, err := time.LoadLocation(strings.TrimSpace(m[2]))
	if err != nil {
		return time.Time{}
	}
	when := strings.ToLower(strings.Join(strings.Fields(m[1]), " "))
	when = strings.ReplaceAll(when, " at ", ", ")
	local := now.In(loc)
	for _, layout := range []string{"3:04pm", "3pm", "15:04", "3:04 pm", "3 pm"} {
		t, err := time.ParseInLocation(layout, when, loc)
		if err != nil {
			continue
		}
		next := time.Date(local.Year(), local.Month(), local.Day(), t.Hour(), t.Minute(), 0, 0, loc)
		if !next.After(now) {
			next = next.AddDate(0, 0, 1)
		}
		return next.UTC()
	}
	for _, layout := range []string{"Jan 2, 3:04pm", "Jan 2, 3pm", "Jan 2 3:04pm", "Jan 2 3pm", "Jan 2, 15:04"} {
		t, err := time.ParseInLocation(layout, when, loc)
		if err != nil {
			continue
		}
		next := time.Date(local.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0, loc)
		if !next.After(now) {
			next = next.AddDate(1, 0, 0)
		}
		return next.UTC()
	}
	return time.Time{}
}

// describeWidth bounds the agent's words in Describe's account: an
// agent's text can be huge, and all on one line.
const describeWidth = 500

// Describe returns a one-line account of a finished run for the
// Formatter's footer: its class and the first line of the agent's words or
// the stderr tail; a success or a usage limit too. The loop's reason for a
// session that went wrong is loop.Describe's.
func Describe(res loop.RunResult) string {
	switch res.Class {
	case loop.ClassSuccess:
		return "success"
	case loop.ClassUsageLimit:
		if res.UsageLimit != nil && !res.UsageLimit.ResetsAt.IsZero() {
			return "usage limit reached; resets at " + res.UsageLimit.ResetsAt.Format(time.RFC3339)
		}
		return "usage limit reached; reset time unknown"
	}
	msg := string(res.Class)
	switch {
	case res.APIErrorStatus != 0:
		msg += fmt.Sprintf(" (HTTP %d)", res.APIErrorStatus)
	case res.Class == loop.ClassCrashed:
		msg += fmt.Sprintf(" (exit code %d, no result line)", res.ExitCode)
	}
	detail := res.Text
	if res.Class == loop.ClassCrashed || detail == "" {
		detail = lastLine(res.Stderr)
	}
	if detail != "" && res.Class != loop.ClassTimeout && res.Class != loop.ClassIdleTimeout && res.Class != loop.ClassCancelled {
		msg += ": " + shorten(firstLine(detail), describeWidth)
	}
	return msg
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
