// Package loop is ralph's engine: it runs an AI coding agent against a
// plan of tasks, a fresh session every iteration, until the plan is done.
// It also holds the domain the other packages share: Task and its
// Status, Actor and the move rules of CheckMove, Outcome, Report,
// Receipt.
//
// A program that embeds the loop supplies it three things:
//
//   - a TaskStore, where the plan lives: looptest.MemStore in memory,
//     package dag on SQLite, dag/postgres on PostgreSQL, dag/progress over
//     a markdown progress file, or a store of your own, which
//     looptest.TestTaskStore checks;
//   - a Runner, which runs one agent session: package claude,
//     agents/codex, agents/gemini, agents/opencode, looptest.FakeRunner in
//     tests, or a runner of your own, which runnertest.TestRunner checks;
//     NewPool makes one of several agents, the next going on when one
//     meets its usage limit, is refused or spends its cap;
//   - an Observer (Config.Observer, optional), which is told everything a
//     run does as Notes: transitions, iterations, agent events, receipts,
//     notices, phases and the final report. SessionLog and EventLog are
//     Observers the loop writes itself when Config.SessionLog is set.
//
// Start a Config from DefaultConfig (MaxRetries 0 really means no retries
// and Timeout 0 no wall-clock limit; PlanConfig and PromptConfig for the
// other modes), then call Run for a build, Plan or RunPrompt. Each runs
// until an Outcome ends it and returns a Report, whose ExitCode is the
// CLI's exit code (README, "Exit codes"), so a CLI maps nothing itself.
// DryRun says what the next iteration would do without doing it.
//
//	cfg := loop.DefaultConfig(root)
//	cfg.MaxIterations = 10
//	rep, err := loop.Run(ctx, cfg, store, runner)
//	if err != nil {
//		return err // OutcomeError: a bad Config, a store error, …
//	}
//	fmt.Println(rep.Outcome, rep.Message)
//
// Run records (DESIGN §15) are the caller's to write: package loop keeps
// none itself, since a run's kind and its exit code belong to whoever
// runs it. A store that implements RunRecorder (dag's stores,
// looptest.MemStore) keeps them: call BeginRun before Run and EndRun
// however it ends, as the ralph CLI does for build, plan and prompt;
// RunRecord.Settled shows a record whose process died (kill -9) as
// RunDied.
//
// ExampleRun, ExamplePlan and ExampleRunPrompt run against the fakes of
// looptest; the programs under examples/ (quickstart, custom-store,
// custom-runner, policy) are complete.
//
// Where to read more. ARCHITECTURE.md, at the repository's root, says how
// the loop works and which rules it keeps: one iteration (§3.1), trouble
// and retries (§3.2), the modes — build, peek, plan, prompt, a progress
// file (§3.3) —, the rules of a run: errors, one writing run per working
// tree (TreeBusyError), claims, leases, usage limits, model strategies
// (§3.4), the test and commit gates (§3.5), the
// verifier's tree and repository guards (§3.6), the logs (§3.7), the
// prompts (§3.8), workers (§5) and the rules that keep an untrusted agent
// in its place (§7). The declarations below say the details: Config's
// fields, Note and Phase, PromptData (which template variable each mode
// fills), Finisher and IterationRecorder, Workspace, Strategy. The README
// says what a user of the CLI built on it sees.
//
// loop imports only the standard library, packages sigil, hostgit and
// safefile, and looplab/fsm: embedding it never drags in SQLite or the
// agents' process code (ARCHITECTURE.md §1).
package loop
