// Package runnertest is the conformance suite of loop.Runner, in the
// spirit of looptest.TestTaskStore and testing/fstest.TestFS: TestRunner
// runs the same subtests against any runner, and ralph runs it against
// each of its own (package claude, agents/codex, agents/gemini,
// agents/opencode) and the example custom runner.
//
// The suite plays the agent itself. It writes a small shell script, the
// fake agent, that records what it was given (arguments, standard input,
// environment, working directory, pid), prints what the harness rendered
// in the agent CLI's own stream format, and then exits, crashes, is killed
// or hangs with a grandchild that ignores SIGTERM. The runner under test
// runs that script as its agent (its Path), so everything between the
// request and the result is the runner's real code: arguments,
// environment, process group, stream decoding, classification, raw log,
// timeouts, cancellation. Each run takes milliseconds (a timeout or a
// cancellation: a fraction of a second), so the suite can run in every
// runner package; the real CLIs against fake APIs stay in each package's
// own end-to-end tests.
//
// What the suite holds every runner to (loop.Runner, loop.RunRequest,
// loop.RunResult; ARCHITECTURE.md §4):
//
//   - the final text reaches RunResult.Text with its sigils, and text a
//     tool printed earlier in the session does not;
//   - the prompt reaches the agent on its standard input, and the system
//     prompt (a megabyte of it) is not on its argv;
//   - a prompt that is a custom slash command of the project in
//     RunRequest.Dir (peek mode's "/ralph-build <peek>") reaches the agent
//     as the command's text (loop.ExpandSlashCommand), unless the agent
//     expands them itself (WithSlashCommands: Claude Code);
//   - the agent runs in RunRequest.Dir with ralph's environment and
//     RunRequest.Env (RALPH_TASK_ID, RALPH_HOLDER, …), less the keys the
//     runner keeps back unless UseAPIKey;
//   - tokens and cost reach RunResult (Usage, CostUSD, CostSource);
//   - an agent that exits without a result, exits non-zero or is killed
//     is trouble (ClassCrashed, the exit code kept), never success;
//   - a cancelled context stops the agent and what it started, a
//     grandchild that ignores SIGTERM included, and the result is
//     ClassCancelled; so it is when the context is cancelled before Run;
//   - Timeout and IdleTimeout stop the agent likewise, with ClassTimeout
//     and ClassIdleTimeout;
//   - a usage limit is ClassUsageLimit with its reset time;
//   - the raw stream is appended to RunRequest.LogPath;
//   - an agent that cannot be found is loop.ErrAgentNotFound, the one kind
//     of error Run returns;
//   - Run is safe for concurrent use, and calls OnEvent only before it
//     returns.
//
// The fake agent needs a POSIX shell and a FIFO (mkfifo); the suite skips
// itself elsewhere. Leftover processes are checked through /proc where
// there is one, else with signal 0.
//
// # Testing your own runner
//
// A Harness says how to make the runner run a given program as its agent,
// and how that agent's CLI prints a session; options declare what the
// runner's agent cannot do (WithoutUsage, WithoutSession, …), and exactly
// the subtests that need it are skipped, naming the option:
//
//	func TestConformance(t *testing.T) {
//		runnertest.TestRunner(t, runnertest.Harness{
//			New: func(t *testing.T, path string) loop.Runner {
//				return &myagent.Runner{Path: path, Grace: 100 * time.Millisecond}
//			},
//			Start:  `{"type":"init","session_id":"s-1"}` + "\n",
//			Answer: func(a runnertest.Answer) string { … the CLI's lines for a … },
//		})
//	}
//
// The package imports only package loop and the standard library.
package runnertest
