// Package telemetry exports a ralph run as OpenTelemetry traces (`ralph build
// --otel`): an Observer turns the loop's notes into spans, and Setup builds
// the OTLP exporter from --otel and the standard OTEL_* variables.
//
// # Spans
//
//	ralph.run                 the command's run; one per run, workers included
//	├── ralph.iteration       one iteration (a worker's, with --workers)
//	│   ├── ralph.agent       the agent's session, timed by its receipt
//	│   ├── ralph.verify      the verifier (--verify), with its receipt
//	│   ├── ralph.gate        the test and commit gates (--test-cmd, --commit)
//	│   └── ralph.integrate   landing the work on the integration branch (--workers)
//	└── …
//
// Attributes:
//
//   - ralph.run: ralph.mode, ralph.session, ralph.workers (0 without
//     --workers), and at its end ralph.outcome, ralph.exit_code,
//     ralph.iterations, ralph.cost_usd.
//   - ralph.iteration: ralph.iteration, ralph.task.id, ralph.task.title
//     (build mode), ralph.worker (with workers), ralph.model (the model
//     asked for), ralph.status (the IterationStatus).
//   - ralph.agent and ralph.verify (the receipt): gen_ai.request.model,
//     gen_ai.usage.input_tokens, gen_ai.usage.output_tokens,
//     gen_ai.usage.cache_read.input_tokens,
//     gen_ai.usage.cache_creation.input_tokens (semantic conventions
//     v1.40.0), ralph.cost_usd, ralph.cost_source (reported, estimated,
//     unknown), ralph.turns, ralph.exit_reason (the ErrorClass: success,
//     usage_limit, …), ralph.mode (build, plan, prompt, verify),
//     ralph.iteration, ralph.task.id, ralph.worker, ralph.agent (the agent
//     CLI), ralph.verdict (verify: pass or fail) and ralph.tool_calls (the
//     session's tool calls).
//   - ralph.verify, ralph.gate, ralph.integrate: ralph.task.id, and when
//     the phase did not pass ralph.status (verify_failed, tests_failed,
//     integration_failed, …).
//
// Span events: ralph.usage_limit_wait (ralph.wait.until RFC 3339,
// ralph.wait.ms, ralph.message, ralph.worker) on the iteration span when
// one is open, else on the run span (a wait comes between iterations, so
// usually the run's); ralph.wait_agents (ralph.held: the task ids other
// agents hold, ralph.message); ralph.notice (ralph.message: what the
// terminal prints as a notice: a task that landed, a released claim);
// ralph.worker_end on the run span (ralph.worker, ralph.outcome,
// ralph.exit_code, ralph.iterations).
//
// # Decisions
//
//   - Times come from the notes (Note.At, the receipt's StartedAt and
//     Duration), never from the clock the observer runs on, so that the
//     spans are what the loop saw and tests on a fake clock are exact.
//   - The agent's session is not a phase note: its span is made, start and
//     end, from its receipt when the receipt arrives (spans are exported
//     when they end anyway). The verifier's session is inside the verify
//     phase: its receipt's figures go on the ralph.verify span.
//   - Status: an iteration whose status is not a success (IterationStatus
//     Success) is an error, except a usage-limit one (a wait, not a
//     failure); a phase that did not pass is an error; an agent session
//     whose exit reason is not success is an error; the run is an error
//     when its outcome is not Outcome.Succeeded (complete, complete with
//     failures, iteration limit). The status description is
//     "<status>: <why>".
//   - Workers share one Observer (it locks; the loop only serialises one
//     run's notes). A worker's session_end ends that worker's open spans
//     and is a ralph.worker_end event; the run span ends with the run's
//     own session_end, a note with no worker, which ralph build sends with
//     the pool's report after a parallel build. A run that never sends it
//     (a crash) has its open spans ended by Shutdown, as errors, at the last
//     note's time.
//   - Agent events are counted (tool calls), not turned into span events:
//     a session can have thousands, and the raw stream keeps them.
//   - Enabling: --otel, or OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set; OTEL_SDK_DISABLED=true or
//     OTEL_TRACES_EXPORTER=none turn traces off whatever else says.
//     OTEL_TRACES_EXPORTER other than otlp, and the http/json protocol, are
//     not supported: Setup says so (ErrConfig) and the command runs
//     without traces. Endpoint, headers, timeout, compression and TLS are
//     the exporters' own reading of the OTEL_EXPORTER_OTLP_* variables;
//     the batch processor reads OTEL_BSP_*.
//   - Off, the Observer sits on OpenTelemetry's no-op tracer provider: no
//     SDK, no exporter, no goroutine, and each note returns after one
//     check (the run span does not record). ralph's commands do not even
//     attach it then.
//   - Export errors go to OpenTelemetry's global error handler, which
//     Setup sets to print one warning on stderr for the whole command;
//     they never change the exit code. Shutdown waits at most
//     ShutdownTimeout (5 s) for the last batch, even after an interrupt.
//
// Package otlptest is an OTLP trace receiver (HTTP and gRPC) for tests.
package telemetry
