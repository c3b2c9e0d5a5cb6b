package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ralph-dev/ralph/loop"
)

// Span names.
const (
	SpanRun       = "ralph.run"
	SpanIteration = "ralph.iteration"
	SpanAgent     = "ralph.agent"
	SpanVerify    = "ralph.verify"
	SpanGate      = "ralph.gate"
	SpanIntegrate = "ralph.integrate"
)

// Span event names.
const (
	EventUsageLimitWait = "ralph.usage_limit_wait"
	EventWaitAgents     = "ralph.wait_agents"
	EventNotice         = "ralph.notice"
	EventWorkerEnd      = "ralph.worker_end"
)

// Attribute keys of ralph's own. The receipt's model and tokens use the
// gen_ai semantic conventions (semconv v1.40.0): gen_ai.request.model,
// gen_ai.usage.input_tokens, gen_ai.usage.output_tokens,
// gen_ai.usage.cache_read.input_tokens and
// gen_ai.usage.cache_creation.input_tokens.
const (
	AttrMode       = attribute.Key("ralph.mode")
	AttrSession    = attribute.Key("ralph.session")
	AttrWorkers    = attribute.Key("ralph.workers")
	AttrOutcome    = attribute.Key("ralph.outcome")
	AttrExitCode   = attribute.Key("ralph.exit_code")
	AttrIterations = attribute.Key("ralph.iterations")
	AttrIteration  = attribute.Key("ralph.iteration")
	AttrTaskID     = attribute.Key("ralph.task.id")
	AttrTaskTitle  = attribute.Key("ralph.task.title")
	AttrWorker     = attribute.Key("ralph.worker")
	AttrModel      = attribute.Key("ralph.model")
	AttrStatus     = attribute.Key("ralph.status")
	AttrCostUSD    = attribute.Key("ralph.cost_usd")
	AttrCostSource = attribute.Key("ralph.cost_source")
	AttrTurns      = attribute.Key("ralph.turns")
	AttrExitReason = attribute.Key("ralph.exit_reason")
	AttrVerdict    = attribute.Key("ralph.verdict")
	AttrAgent      = attribute.Key("ralph.agent")
	AttrToolCalls  = attribute.Key("ralph.tool_calls")
	AttrMessage    = attribute.Key("ralph.message")
	AttrWaitUntil  = attribute.Key("ralph.wait.until")
	AttrWaitMS     = attribute.Key("ralph.wait.ms")
	AttrHeld       = attribute.Key("ralph.held")
)

// Observer is a loop.Observer that turns a run's notes into spans: one
// ralph.run span, a ralph.iteration span for each iteration under it, and
// under each iteration a ralph.agent span for the agent's session and
// ralph.verify, ralph.gate and ralph.integrate spans for the phases after
// it. The workers of a parallel build share one Observer: their
// iterations are all children of the one run span.
//
// An Observer is safe for use by several goroutines at once.
type Observer struct {
	tracer  trace.Tracer
	workers int

	mu      sync.Mutex
	run     trace.Span
	runCtx  context.Context
	ended   bool
	iters   map[iterKey]*iterSpan
	lastAt  time.Time
	session string
}

type iterKey struct {
	worker string
	n      int
}

// iterSpan is an open iteration and what is open under it.
type iterSpan struct {
	ctx       context.Context
	span      trace.Span
	phase     trace.Span // the phase under way, or nil
	phaseName loop.Phase
	// tools counts the tool calls of the agent's session, and phaseTools
	// those made during the phase under way (the verifier's).
	tools, phaseTools int
}

// NewObserver returns an Observer making spans with tp's tracer. workers
// is the run's number of workers (0 without --workers), recorded on the
// run span.
func NewObserver(tp trace.TracerProvider, workers int) *Observer {
	return &Observer{
		tracer:  tp.Tracer("github.com/ralph-dev/ralph/telemetry"),
		workers: workers,
		iters:   map[iterKey]*iterSpan{},
	}
}

// Observe implements loop.Observer.
func (o *Observer) Observe(n loop.Note) {
	if n.Kind == loop.NoteTransition {
		return // the machine's moves are inside the spans already
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended {
		return
	}
	if !n.At.IsZero() {
		o.lastAt = n.At
	}
	o.startRun(n)
	if !o.run.IsRecording() {
		return // a no-op tracer (traces off, or sampled out): nothing to build
	}
	k := iterKey{n.Worker, n.Iteration}
	switch n.Kind {
	case loop.NoteIterationStart:
		o.startIteration(k, n)
	case loop.NoteIterationEnd:
		if it := o.iters[k]; it != nil {
			o.endIteration(k, it, n)
		}
	case loop.NoteAgentEvent:
		if it := o.iters[k]; it != nil && n.AgentEvent.Kind == loop.EventToolUse {
			if it.phase != nil {
				it.phaseTools++
			} else {
				it.tools++
			}
		}
	case loop.NotePhaseStart:
		if it := o.iters[k]; it != nil {
			o.startPhase(it, n)
		}
	case loop.NotePhaseEnd:
		if it := o.iters[k]; it != nil && it.phase != nil && it.phaseName == n.Phase {
			endPhase(it, n.Status, n.Message, n.At)
		}
	case loop.NoteReceipt:
		o.receipt(o.iters[k], n)
	case loop.NoteWait:
		o.spanFor(k).AddEvent(EventUsageLimitWait, trace.WithTimestamp(n.At), trace.WithAttributes(workerAttr(n.Worker,
			AttrWaitUntil.String(n.Until.UTC().Format(time.RFC3339)),
			AttrWaitMS.Int64(n.Wait.Milliseconds()),
			AttrMessage.String(n.Message),
		)...))
	case loop.NoteWaitAgents:
		held := make([]string, len(n.Held))
		for i, t := range n.Held {
			held[i] = t.ID
		}
		o.run.AddEvent(EventWaitAgents, trace.WithTimestamp(n.At), trace.WithAttributes(
			workerAttr(n.Worker, AttrHeld.StringSlice(held), AttrMessage.String(n.Message))...))
	case loop.NoteNotice:
		o.spanFor(k).AddEvent(EventNotice, trace.WithTimestamp(n.At), trace.WithAttributes(AttrMessage.String(n.Message)))
	case loop.NoteSessionEnd:
		o.sessionEnd(n)
	}
}

// startRun starts the run span at the first note.
func (o *Observer) startRun(n loop.Note) {
	if o.run != nil {
		return
	}
	o.session = n.Session
	o.runCtx, o.run = o.tracer.Start(context.Background(), SpanRun,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(n.At),
		trace.WithAttributes(
			AttrMode.String(string(n.Mode)),
			AttrSession.String(n.Session),
			AttrWorkers.Int(o.workers),
		))
}

// spanFor is the open iteration span of k, else the run span.
func (o *Observer) spanFor(k iterKey) trace.Span {
	if it := o.iters[k]; it != nil {
		return it.span
	}
	return o.run
}

func (o *Observer) startIteration(k iterKey, n loop.Note) {
	if old := o.iters[k]; old != nil { // never left open: a start again ends the old one
		o.endIteration(k, old, loop.Note{At: n.At})
	}
	attrs := []attribute.KeyValue{AttrIteration.Int(n.Iteration)}
	if n.Task.ID != "" {
		attrs = append(attrs, AttrTaskID.String(n.Task.ID), AttrTaskTitle.String(n.Task.Title))
	}
	if n.Worker != "" {
		attrs = append(attrs, AttrWorker.String(n.Worker))
	}
	if n.Model != "" {
		attrs = append(attrs, AttrModel.String(n.Model))
	}
	ctx, span := o.tracer.Start(o.runCtx, SpanIteration, trace.WithTimestamp(n.At), trace.WithAttributes(attrs...))
	o.iters[k] = &iterSpan{ctx: ctx, span: span}
}

func (o *Observer) endIteration(k iterKey, it *iterSpan, n loop.Note) {
	if it.phase != nil {
		endPhase(it, loop.IterCancelled, "the iteration ended first", n.At)
	}
	if n.Status != "" {
		it.span.SetAttributes(AttrStatus.String(string(n.Status)))
		if !n.Status.Success() && n.Status != loop.IterUsageLimit {
			it.span.SetStatus(codes.Error, statusText(n.Status, n.Message))
		}
	}
	if n.Model != "" {
		it.span.SetAttributes(AttrModel.String(n.Model))
	}
	it.span.End(trace.WithTimestamp(n.At))
	delete(o.iters, k)
}

func (o *Observer) startPhase(it *iterSpan, n loop.Note) {
	if it.phase != nil {
		endPhase(it, loop.IterCancelled, "another phase began", n.At)
	}
	name := "ralph." + string(n.Phase)
	_, it.phase = o.tracer.Start(it.ctx, name, trace.WithTimestamp(n.At), trace.WithAttributes(AttrTaskID.String(n.Task.ID)))
	it.phaseName = n.Phase
	it.phaseTools = 0
}

func endPhase(it *iterSpan, status loop.IterationStatus, why string, at time.Time) {
	if it.phaseName == loop.PhaseVerify {
		it.phase.SetAttributes(AttrToolCalls.Int(it.phaseTools))
	}
	if status != "" {
		it.phase.SetAttributes(AttrStatus.String(string(status)))
		it.phase.SetStatus(codes.Error, statusText(status, why))
	}
	it.phase.End(trace.WithTimestamp(at))
	it.phase, it.phaseName = nil, ""
}

// receipt puts a session's receipt on a span: a ralph.agent span of its
// own for the agent's session, timed by the receipt; the open
// ralph.verify span for the verifier's.
func (o *Observer) receipt(it *iterSpan, n loop.Note) {
	rc := n.Receipt
	if rc == nil {
		return
	}
	attrs := receiptAttrs(rc)
	if rc.Mode == string(loop.ModeVerify) && it != nil && it.phase != nil && it.phaseName == loop.PhaseVerify {
		it.phase.SetAttributes(attrs...)
		if rc.ExitReason != "" && rc.ExitReason != string(loop.ClassSuccess) {
			it.phase.SetStatus(codes.Error, "the verifier's session ended with "+rc.ExitReason)
		}
		return
	}
	parent, tools := o.runCtx, 0
	if it != nil {
		parent, tools = it.ctx, it.tools
		it.tools = 0
	}
	name := SpanAgent
	if rc.Mode == string(loop.ModeVerify) {
		name = SpanVerify
	} else {
		attrs = append(attrs, AttrToolCalls.Int(tools))
	}
	start := rc.StartedAt
	if start.IsZero() {
		start = n.At.Add(-rc.Duration)
	}
	_, span := o.tracer.Start(parent, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if rc.ExitReason != "" && rc.ExitReason != string(loop.ClassSuccess) {
		span.SetStatus(codes.Error, "the agent's session ended with "+rc.ExitReason)
	}
	span.End(trace.WithTimestamp(start.Add(rc.Duration)))
}

// receiptAttrs are a receipt's figures as attributes.
func receiptAttrs(rc *loop.Receipt) []attribute.KeyValue {
	costSource := string(rc.CostSource)
	if costSource == "" {
		costSource = string(loop.CostReported)
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIRequestModelKey.String(rc.Model),
		semconv.GenAIUsageInputTokensKey.Int64(rc.InputTokens),
		semconv.GenAIUsageOutputTokensKey.Int64(rc.OutputTokens),
		semconv.GenAIUsageCacheReadInputTokensKey.Int64(rc.CacheReadTokens),
		semconv.GenAIUsageCacheCreationInputTokensKey.Int64(rc.CacheWriteTokens),
		AttrCostUSD.Float64(rc.CostUSD),
		AttrCostSource.String(costSource),
		AttrTurns.Int(rc.Turns),
		AttrExitReason.String(rc.ExitReason),
		AttrMode.String(rc.Mode),
		AttrIteration.Int(rc.Iteration),
	}
	if rc.TaskID != "" {
		attrs = append(attrs, AttrTaskID.String(rc.TaskID))
	}
	if rc.Worker != "" {
		attrs = append(attrs, AttrWorker.String(rc.Worker))
	}
	if rc.Agent != "" {
		attrs = append(attrs, AttrAgent.String(rc.Agent))
	}
	if rc.Verdict != "" {
		attrs = append(attrs, AttrVerdict.String(rc.Verdict))
	}
	return attrs
}

// sessionEnd ends a worker's open spans (a worker's own session_end) or
// the run (the run's: no worker).
func (o *Observer) sessionEnd(n loop.Note) {
	for k, it := range o.iters {
		if n.Worker == "" || k.worker == n.Worker {
			o.endIteration(k, it, loop.Note{At: n.At, Status: loop.IterCancelled, Message: "the run ended first"})
		}
	}
	rep := n.Report
	if n.Worker != "" {
		attrs := []attribute.KeyValue{AttrWorker.String(n.Worker)}
		if rep != nil {
			attrs = append(attrs, AttrOutcome.String(string(rep.Outcome)), AttrExitCode.Int(rep.ExitCode()), AttrIterations.Int(rep.Iterations))
		}
		o.run.AddEvent(EventWorkerEnd, trace.WithTimestamp(n.At), trace.WithAttributes(attrs...))
		return
	}
	if rep != nil {
		o.run.SetAttributes(
			AttrOutcome.String(string(rep.Outcome)),
			AttrExitCode.Int(rep.ExitCode()),
			AttrIterations.Int(rep.Iterations),
			AttrCostUSD.Float64(rep.CostUSD),
		)
		if !rep.Outcome.Succeeded() {
			o.run.SetStatus(codes.Error, statusText(loop.IterationStatus(rep.Outcome), rep.Message))
		}
	}
	o.run.End(trace.WithTimestamp(n.At))
	o.ended = true
}

// End ends whatever spans are still open, at the last note's time: a run
// that stopped without its session_end note (a crash, or a parallel build
// whose caller did not send the run's). Notes after End are ignored.
func (o *Observer) End() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended || o.run == nil {
		o.ended = true
		return
	}
	for k, it := range o.iters {
		o.endIteration(k, it, loop.Note{At: o.lastAt, Status: loop.IterCancelled, Message: "the run ended first"})
	}
	o.run.SetStatus(codes.Error, "the run ended without its report")
	o.run.End(trace.WithTimestamp(o.lastAt))
	o.ended = true
}

// workerAttr appends ralph.worker to attrs when there is a worker.
func workerAttr(worker string, attrs ...attribute.KeyValue) []attribute.KeyValue {
	if worker != "" {
		attrs = append(attrs, AttrWorker.String(worker))
	}
	return attrs
}

func statusText(status loop.IterationStatus, why string) string {
	if why == "" {
		return string(status)
	}
	return string(status) + ": " + why
}
