package loop

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralph-dev/ralph/sigil"
)

// SpecsDir is where plan mode looks for specs: <root>/specs/*.md.
const SpecsDir = "specs"

// NoSpecsHint says where specs go; a NoSpecsError's message ends with it.
const NoSpecsHint = "write specs in specs/*.md, or write a feature's spec file"

// NoSpecsError is the error of PlanSpecs when there is nothing to plan
// from; it wraps ErrNoSpecs. Missing says what is missing: "no specs in
// /p/specs", with the features whose spec is still to be written ("…,
// and feature billing has no spec yet (specs/billing.md)"), or "feature
// billing has no spec yet (specs/billing.md)". Its message is ErrNoSpecs,
// Missing and NoSpecsHint; a program with its own way to give a feature
// a spec says so after Missing instead (the CLI names `ralph feature
// add`).
type NoSpecsError struct {
	Missing string
}

func (e *NoSpecsError) Error() string {
	return fmt.Sprintf("%v: %s; %s", ErrNoSpecs, e.Missing, NoSpecsHint)
}

// Unwrap returns ErrNoSpecs.
func (e *NoSpecsError) Unwrap() error { return ErrNoSpecs }

// planMode is plan mode: each session gets the specs and adds tasks to
// the plan, until it says COMPLETE.
type planMode struct {
	*run
	taskless
	planState
}

// planState is what plan mode keeps between iterations.
type planState struct {
	specs   []SpecFile
	feature *FeatureContext
	// before is the number of tasks in scope when the run started;
	// beforeAll in the whole plan (they differ when planning a feature).
	before, beforeAll int
	// complete is set when the latest session said COMPLETE.
	complete bool
}

// Plan runs the plan loop (`ralph plan`): each iteration, an
// agent session gets the specs — <root>/specs/*.md and every feature's
// spec (PlanSpecs), or only the spec of the feature cfg.Scope.Feature
// names — and creates tasks through
// `$RALPH_BIN task add` and `task dep add`, until it says
// <promise>COMPLETE</promise> or cfg.MaxIterations (0: DefaultPlanIterations)
// have run. Start cfg from PlanConfig (a DefaultConfig, whose Mode is build,
// is taken as plan mode too).
//
// Outcomes: OutcomeComplete when the agent said COMPLETE and the scope
// holds at least one task; OutcomeNoPlan (exit 2) when there are no specs
// (Plan returns at once: no agent runs, no log is written), or when the run
// ends — by COMPLETE or by the iteration limit — with the scope still
// empty; OutcomeLimitReached when the limit came first with tasks planned;
// and, as in Run, OutcomeFailure, OutcomeAgentFailed, OutcomeGitFailed,
// OutcomeUsageLimit, OutcomeBudgetExhausted, OutcomeCancelled and
// OutcomeError. The loop claims nothing; there is no test gate, and the
// commit gate (cfg.Commit) commits "plan: iteration <n> - …" when the
// session changed files outside .ralph/ (the tasks themselves live in the
// database, so nothing to commit is no trouble here).
//
// Errors are Run's: a non-nil error exactly when the outcome is
// OutcomeError. A feature scope needs a store that is a FeatureStore, and
// a feature it knows.
func Plan(ctx context.Context, cfg Config, store TaskStore, runner Runner) (Report, error) {
	fail := func(err error) (Report, error) {
		return Report{Outcome: OutcomeError, Message: err.Error(), Remaining: -1}, err
	}
	if store == nil || runner == nil {
		return fail(fmt.Errorf("%w: Plan needs a store and a runner", ErrConfig))
	}
	modeConfig(&cfg, ModePlan)
	auto := cfg.Session == ""
	_, strat, err := cfg.normalizeFor(ModePlan)
	if err != nil {
		return fail(err)
	}
	specs, feature, err := PlanSpecs(ctx, cfg.Root, cfg.Scope.Feature, store)
	if errors.Is(err, ErrNoSpecs) {
		return Report{Outcome: OutcomeNoPlan, Message: strings.TrimPrefix(err.Error(), "loop: "), Cause: err, Remaining: -1, AgentID: cfg.AgentID}, nil
	}
	if err != nil {
		return fail(err)
	}
	st := planState{specs: specs, feature: feature}
	c, err := store.Counts(ctx, cfg.Scope)
	if err != nil {
		return fail(err)
	}
	st.before, st.beforeAll = c.Total(), c.Total()
	if cfg.Scope.Feature != "" {
		all, err := store.Counts(ctx, Scope{})
		if err != nil {
			return fail(err)
		}
		st.beforeAll = all.Total()
	}
	r := newRun(cfg, store, runner, strat, auto)
	r.receipts, _ = store.(ReceiptStore)
	r.mode = &planMode{run: r, planState: st}
	return r.exec(ctx)
}

// EmptyFeatureError is why plan mode ended without a plan when it planned
// one feature (Report.Cause): the feature has no task, and Outside tasks
// were added to the plan outside it meanwhile (the planner forgot the
// feature when it added them).
type EmptyFeatureError struct {
	Feature string
	Outside int
}

func (e *EmptyFeatureError) Error() string {
	s := "feature " + e.Feature + " has no task"
	if e.Outside > 0 {
		s += fmt.Sprintf(" (%d %s added outside feature %s)", e.Outside, plural(e.Outside, "task was", "tasks were"), e.Feature)
	}
	return s
}

// ErrNoSpecs is returned by PlanSpecs when there is nothing to plan from.
// Its message says where specs go.
var ErrNoSpecs = errors.New("loop: nothing to plan")

// PlanSpecs returns what plan mode plans from. With feature empty, the
// whole plan: the specs of ReadSpecs, then, when store is a FeatureStore,
// the spec of every feature in the order they were added, each with its
// SpecFile.Feature set (a feature's spec that is also one of specs/*.md
// is listed once, as the feature's). With a feature, that feature (store
// must be a FeatureStore that knows it) and its spec file. A feature's
// spec that is blank, missing or exactly FeatureSpecStub does not count.
// No spec at all is a *NoSpecsError that says where specs go
// (and which features still have none); an unknown feature is the store's
// ErrFeatureNotFound. Plan calls it first; a CLI can call it before it
// looks for the agent, so that "nothing to plan" comes first.
func PlanSpecs(ctx context.Context, root, feature string, store TaskStore) ([]SpecFile, *FeatureContext, error) {
	if feature == "" {
		specs, err := wholePlanSpecs(ctx, root, store)
		return specs, nil, err
	}
	fs, ok := store.(FeatureStore)
	if !ok {
		return nil, nil, fmt.Errorf("%w: planning feature %s needs a store that knows features", ErrConfig, feature)
	}
	f, err := fs.Feature(ctx, feature)
	if err != nil {
		return nil, nil, err
	}
	fc, err := featureContext(root, f)
	if err != nil {
		return nil, nil, err
	}
	spec, ok, err := featureSpec(root, f)
	if err != nil {
		return nil, fc, err
	}
	if !ok {
		return nil, fc, &NoSpecsError{Missing: fmt.Sprintf("feature %s has no spec yet (%s)", feature, relSlash(root, f.SpecPath))}
	}
	return []SpecFile{spec}, fc, nil
}

// wholePlanSpecs is PlanSpecs without a feature.
func wholePlanSpecs(ctx context.Context, root string, store TaskStore) ([]SpecFile, error) {
	specs, err := ReadSpecs(root)
	if err != nil {
		return nil, err
	}
	var features []Feature
	if fs, ok := store.(FeatureStore); ok {
		if features, err = fs.Features(ctx); err != nil {
			return nil, err
		}
	}
	var without []Feature // features whose spec is still to be written
	for _, f := range features {
		spec, ok, err := featureSpec(root, f)
		if err != nil {
			return nil, err
		}
		if !ok {
			without = append(without, f)
			continue
		}
		if i := slices.IndexFunc(specs, func(s SpecFile) bool { return s.Path == spec.Path }); i >= 0 {
			specs[i] = spec
			continue
		}
		specs = append(specs, spec)
	}
	if len(specs) > 0 {
		return specs, nil
	}
	msg := "no specs in " + filepath.Join(root, SpecsDir)
	if n := len(without); n > 0 {
		const shown = 5 // features named in the message
		var names, paths []string
		for _, f := range without[:min(n, shown)] {
			names, paths = append(names, f.Name), append(paths, relSlash(root, f.SpecPath))
		}
		if n > shown {
			names, paths = append(names, fmt.Sprintf("%d more", n-shown)), append(paths, "…")
		}
		msg += fmt.Sprintf(", and %s %s %s no spec yet (%s)", plural(n, "feature", "features"),
			strings.Join(names, ", "), plural(n, "has", "have"), strings.Join(paths, ", "))
	}
	return nil, &NoSpecsError{Missing: msg}
}

// featureSpec is feature f's spec, labelled with f and its plan notes, and
// false when f has none: its spec file is missing, blank or exactly
// FeatureSpecStub.
func featureSpec(root string, f Feature) (SpecFile, bool, error) {
	content, err := readSpec(root, f.SpecPath)
	if err != nil || strings.TrimSpace(content) == "" || content == FeatureSpecStub(f.Name) {
		return SpecFile{}, false, err
	}
	plan, err := readSpec(root, f.PlanPath)
	if err != nil {
		return SpecFile{}, false, err
	}
	if strings.TrimSpace(plan) == "" || plan == FeaturePlanStub(f.Name) {
		plan = ""
	}
	return SpecFile{Path: relSlash(root, f.SpecPath), Content: content, Feature: f.Name, Plan: plan}, true, nil
}

// ReadSpecs reads <root>/specs/*.md in name order. Every file with
// non-blank content is a spec, a lone heading included; blank files are
// left out. No specs directory is no specs, not an error. A link under
// specs/ (or specs/ itself a link) is refused, an error (see saferead.go).
func ReadSpecs(root string) ([]SpecFile, error) {
	return readSpecs(root) // no link followed: saferead.go
}

// FeatureSpecStub is the spec file `ralph feature add NAME` writes when no
// --spec is given. A feature whose spec is exactly this (or blank) has no
// spec: plan mode says so rather than plan from a title.
func FeatureSpecStub(name string) string {
	return "# Spec: " + name + "\n"
}

// FeaturePlanStub is the plan file `ralph feature add NAME` writes when no
// --plan is given. Plan mode shows no notes when the plan is exactly this.
func FeaturePlanStub(name string) string {
	return "# Plan: " + name + "\n"
}

// relSlash is path relative to root with forward slashes (path itself when
// it is not under root).
func relSlash(root, path string) string {
	if !filepath.IsAbs(path) {
		return filepath.ToSlash(path)
	}
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return path
}

func (p *planMode) prompts() []string { return []string{PromptPlan} }

// iteration is one session of the plan loop. counted is false when a
// usage limit turned it into a wait.
func (p *planMode) iteration(ctx context.Context) (counted bool, s *stop) {
	r := p.run
	n := r.report.Iterations + 1
	data, err := r.sessionData(ModePlan, n)
	if err != nil {
		return false, internal(err)
	}
	data.Specs, data.Feature = p.specs, p.feature
	sess, s := r.render(PromptPlan, data)
	if s != nil {
		return false, s
	}
	got, model, hinted, s := r.runTaskless(ctx, n, sess)
	if got == nil {
		return false, s
	}
	res := *got
	r.consumeHint(hinted)

	v := p.handle(ctx, n, res)
	r.countIteration(n, Task{}, model, hinted, v.status, v.why)
	return true, v.stop
}

// handle judges a finished plan session: agent trouble, FAILURE, the
// commit gate, COMPLETE.
func (p *planMode) handle(ctx context.Context, n int, res RunResult) verdict {
	r := p.run
	p.complete = false
	if !res.OK() {
		why := Describe(res)
		return judged(IterAgentTrouble, why, r.agentTrouble(res, why))
	}
	sig := sigil.Parse(res.Text)
	if sig.NextModel != "" {
		r.hint = sig.NextModel
	}
	if sig.Failure {
		return judged(IterFailure, "", stopWith(OutcomeFailure, "the agent declared FAILURE: %s", excerpt(res.Text, 200)))
	}
	if r.cfg.Commit {
		if _, err := r.commitChanges(ctx, n, p.title()); err != nil {
			if ctx.Err() == nil {
				r.note.notice(n, "%v", err)
			}
			return r.gateTrouble(ctx, IterGitFailed, OutcomeGitFailed, err)
		}
		r.gateStreak = 0
	}
	p.complete = sig.Complete
	return judged(IterSessionOK, "", nil)
}

// title names a plan iteration in its commit message.
func (p *planMode) title() string {
	if p.feature != nil {
		return "plan feature " + p.feature.Name
	}
	names := make([]string, len(p.specs))
	for i, s := range p.specs {
		names[i] = s.Path
		if s.Feature != "" {
			names[i] = "feature " + s.Feature
		}
	}
	title := "plan from " + strings.Join(names, ", ")
	if len(title) > 72 {
		title = fmt.Sprintf("plan from %d specs", len(names))
	}
	return title
}

// planExitChecks ends the plan loop on COMPLETE or at the iteration limit.
// Either way, a scope that is still empty is nothing to do (exit 2): the
// build that follows would find no plan.
func (p *planMode) exitChecks(ctx context.Context) *stop {
	r := p.run
	if !p.complete && r.report.Iterations < r.cfg.MaxIterations {
		return nil
	}
	c, err := r.store.Counts(ctx, r.cfg.Scope)
	if err != nil {
		return r.storeErr(ctx, err)
	}
	total := c.Total()
	added := total - p.before
	planned := fmt.Sprintf("%d %s in the plan (%d added)", total, plural(total, "task", "tasks"), added)
	empty := "the plan is empty"
	var cause error
	if total == 0 && p.feature != nil {
		fe := &EmptyFeatureError{Feature: p.feature.Name}
		if all, err := r.store.Counts(ctx, Scope{}); err == nil && all.Total() > p.beforeAll {
			fe.Outside = all.Total() - p.beforeAll
		}
		empty, cause = fe.Error(), fe
	}
	switch {
	case p.complete && total == 0:
		s := stopWith(OutcomeNoPlan, "the agent said planning is complete, but %s", empty)
		s.cause = cause
		return s
	case p.complete:
		return stopWith(OutcomeComplete, "planning complete: %s", planned)
	case total == 0:
		s := stopWith(OutcomeNoPlan, "iteration limit reached (%d) and %s", r.cfg.MaxIterations, strings.Replace(empty, "is empty", "is still empty", 1))
		s.cause = cause
		return s
	}
	return stopWith(OutcomeLimitReached, "iteration limit reached (%d) before the agent said COMPLETE; %s", r.cfg.MaxIterations, planned)
}
