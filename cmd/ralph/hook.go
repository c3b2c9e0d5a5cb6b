package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/broker"
	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// sessionEndHook is the command of the SessionEnd hook `ralph init`
// installs in .claude/settings.json. Claude Code runs SessionEnd hooks at
// the end of every `claude -p` session, normal exits included, so the hook
// must never undo what the loop still owns:
// `ralph hook session-end` changes nothing while the loop that runs the
// agent lives. Outside a ralph run RALPH_HOLDER is unset, and the shell
// test spares even starting ralph.
const sessionEndHook = `[ -z "$RALPH_HOLDER" ] || "${RALPH_BIN:-ralph}" hook session-end || true`

// isOldSessionEndHook reports whether command is the hook an earlier ralph
// installed: it released every claim of the agent whenever a session
// ended, the loop's own claim included, before the loop could complete
// the task. `ralph init` replaces it.
func isOldSessionEndHook(command string) bool {
	return strings.Contains(command, `task release --agent "$RALPH_AGENT_ID"`)
}

func hookCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:  "hook",
		Usage: "the commands of the Claude Code hooks 'ralph init' installs",
		// Claude Code runs these, people do not: kept out of the help.
		Hidden: true,
		Action: groupAction,
		Subcommands: []*cli.Command{
			{
				Name:  "session-end",
				Usage: "the SessionEnd hook: release an agent's claims once the ralph loop that ran it is gone",
				Description: "Claude Code runs it when a session ends. It reads RALPH_AGENT_ID and RALPH_HOLDER\n" +
					"from the agent's environment. While that loop process lives it changes nothing: the\n" +
					"loop decides what becomes of the session's tasks. When the loop is gone (killed), it\n" +
					"returns the agent's unfinished claims to pending at once instead of after their leases.\n" +
					"Outside a ralph run, and in a sandboxed agent's session ($RALPH_SOCKET set), it does nothing.",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					return sessionEnd(c, cfg)
				},
			},
		},
	}
}

// sessionEnd is `ralph hook session-end`. In a sandboxed session
// ($RALPH_SOCKET set) it does nothing: the plan is out of the agent's
// reach there, the broker does not serve release, and the loop that
// serves the broker is alive while the session lasts (when it is killed,
// the next claim or task command recovers the claims whose holder is
// gone).
func sessionEnd(c *cli.Context, cfg appConfig) error {
	if strings.TrimSpace(cfg.getenv(broker.EnvSocket)) != "" {
		return nil
	}
	agent := strings.TrimSpace(cfg.getenv("RALPH_AGENT_ID"))
	holder, err := loop.ParseHolder(cfg.getenv(loop.EnvHolder))
	if err != nil {
		return err
	}
	if agent == "" || holder.IsZero() {
		return nil // not a session of a ralph run
	}
	if holder.Liveness() != loop.HolderGone {
		return nil // the loop lives (or cannot be seen from here): it decides
	}
	return withStore(cfg, func(c *cli.Context, _ project, st *dag.Store) error {
		ids, err := st.ReleaseAgent(c.Context, agent, fmt.Sprintf("session ended after its ralph loop (%s) was gone", holder))
		for _, id := range ids {
			fmt.Fprintln(cfg.stdout, id)
		}
		return err
	})(c)
}
