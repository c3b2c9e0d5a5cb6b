package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/notify"
)

// envNotify holds --notify targets, comma-separated.
const envNotify = "RALPH_NOTIFY"

// notifyFlag is --notify of build, plan and prompt (DESIGN §15).
func notifyFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "notify", EnvVars: []string{envNotify},
		Usage: "tell `TARGET` when the run ends, a task fails, the run is blocked or waits out a usage limit: an http(s) URL gets a POST of JSON (a Slack-style webhook shows its text), anything else is a shell command that gets the JSON on stdin; repeatable"}
}

// newNotifier is the Notifier of the --notify targets of a run of kind in
// project p; nil when there are none. A target that is neither an
// http(s) URL nor a command is a usage error, before anything runs.
// Command targets run on the host (never in --sandbox's box: they are the
// user's), in a process group ralph reaps.
func newNotifier(c *cli.Context, cfg appConfig, p project, kind loop.RunKind) (*notify.Notifier, error) {
	targets := c.StringSlice("notify")
	if len(targets) == 0 {
		return nil, nil
	}
	plan := ""
	if d, err := resolveDB(c, p); err == nil && d.server() {
		plan = d.plan
	}
	n, err := notify.New(targets, notify.Options{Project: p.root, Plan: plan, Kind: string(kind),
		Commands: &agentproc.Commands{},
		Warn: func(format string, args ...any) {
			fmt.Fprintf(cfg.stderr, "ralph: warning: "+format+"\n", args...)
		}})
	if err != nil {
		return nil, &usageError{cmd: "ralph " + c.Command.Name, err: err}
	}
	return n, nil
}
