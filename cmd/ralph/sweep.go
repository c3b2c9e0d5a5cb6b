package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ralph-dev/ralph/agentproc"
)

// sweepLeftovers stops what a ralph that died (even by SIGKILL) left on
// this host — its agents' processes, found by their RALPH_HOLDER — and
// removes its temporary files (ARCHITECTURE.md §2.2). build, plan and
// prompt call it once their arguments are checked, before their loop
// starts any agent; a dry run does not. It says what it stopped in one
// line on stderr; a sweep that cannot run is a warning, never an error.
func sweepLeftovers(ctx context.Context, cfg appConfig) {
	swept, err := agentproc.Sweep(ctx, 0)
	if err != nil && !errors.Is(err, errors.ErrUnsupported) && ctx.Err() == nil {
		fmt.Fprintf(cfg.stderr, "ralph: warning: could not look for processes a dead ralph left: %v\n", err)
	}
	if note := sweepNote(swept); note != "" {
		fmt.Fprintf(cfg.stderr, "ralph: %s\n", note)
	}
}

// sweepNote is the line that says which processes the sweep stopped (at
// most three named), and how many files it removed with them; "" when it
// stopped none (a stale temporary file alone is not worth a line).
func sweepNote(s agentproc.Swept) string {
	n := len(s.Processes)
	if n == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "note: stopped %d process%s left running by a ralph that is gone:", n, pluralEs(n))
	for i, p := range s.Processes {
		if i == 3 {
			fmt.Fprintf(&b, " and %d more", n-3)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d %s", p.PID, shorten(p.Command, 40))
	}
	if f := len(s.Files); f > 0 {
		fmt.Fprintf(&b, "; removed %d temporary file%s of it", f, plural(f))
	}
	return b.String()
}

func pluralEs(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}

// shorten cuts s to at most max bytes (on a rune boundary), marking the
// cut with "…".
func shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
