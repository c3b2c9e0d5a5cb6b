package loop

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"text/template"
	"text/template/parse"

	"github.com/ralph-dev/ralph/safefile"
)

//go:embed prompts/*.md
var embeddedPrompts embed.FS

// The prompt templates. Each is embedded from loop/prompts/<name>.md and
// can be overridden by <root>/.ralph/prompts/<name>.md.
//
// Each session gets two: the user prompt (the names below), which carries
// the task context and reaches the agent on standard input, and the system
// prompt (SystemPromptName: "system-build", …), which carries ralph's
// agent protocol for the mode — what ralph is, the sigils it reads from
// the final message, `$RALPH_BIN task …`, one task per session.
const (
	PromptBuild  = "build"  // one loop-claimed task
	PromptVerify = "verify" // the verifier session
	PromptPeek   = "peek"   // peek mode: "/ralph-build <peek markdown>"
	PromptPlan   = "plan"   // plan mode: turn the specs into tasks
	PromptAdHoc  = "prompt" // prompt mode: wraps the ad-hoc prompt file ({{.Prompt}})
)

// SystemPromptName is the name of the system prompt template that goes with
// the user prompt template name: "system-" + name.
func SystemPromptName(name string) string { return "system-" + name }

// PromptNames lists the prompt templates: the user prompts, then their
// system prompts in the same order.
func PromptNames() []string {
	user := []string{PromptBuild, PromptVerify, PromptPeek, PromptPlan, PromptAdHoc}
	names := append([]string(nil), user...)
	for _, n := range user {
		names = append(names, SystemPromptName(n))
	}
	return names
}

// PromptData is what prompt templates see. Override templates may use any
// field; naming one that does not exist is an error when the template is
// loaded, not halfway through a run.
//
// Every template gets a PromptData; a mode's system prompt gets the same
// one as its user prompt. What each mode fills:
//
//	variable                 build  verify  peek  plan  prompt
//	.Mode                    build  verify  build plan  prompt
//	.Iteration .AgentID      yes    yes     yes   yes   yes (1)
//	.Root .RalphBin          yes    yes     yes   yes   yes
//	.Task (.ID .Title        yes    yes     -     -     -
//	  .Description .Priority
//	  .RetryCount …)
//	.Parent (a *Task)        yes    yes     -     -     -
//	.Blockers (.Task         yes    -       -     -     -
//	  .Summary)
//	.Retry (.Count           yes    -       -     -     -
//	  .MaxRetries .Reason)
//	.Feature (.Name .Spec    yes    -       -     yes   -
//	  .Plan)
//	.Specs (.Path .Content   -      -       -     yes   -
//	  .Feature .Plan)
//	.Skills (.Name           yes    -       -     yes   yes
//	  .Description .Path)
//	.Peek                    -      -       yes   -     -
//	.AgentText               -      yes     -     -     -
//	.Prompt                  -      -       -     -     yes
//
// The spec and plan of a task's feature are .Feature.Spec and
// .Feature.Plan (contents, empty when the file is missing); in plan mode
// the specs being planned are .Specs (a feature's spec has .Feature, its
// name, and .Plan, its plan notes), and .Feature is set with
// Scope.Feature.
// A field a mode does not fill is its zero value (nil pointers and empty
// lists are false in {{if}} and {{with}}). A variable PromptData does not
// have is an error naming it when the override is loaded.
type PromptData struct {
	// Mode is the run's mode: build, verify, plan or prompt (peek mode's
	// sessions are build).
	Mode Mode
	// Task is the claimed task (build and verify prompts; zero otherwise).
	Task Task
	// Parent is the task's parent, nil when it has none.
	Parent *Task
	// Blockers are the task's done blockers with their latest log message.
	Blockers []BlockerContext
	// Retry is set when the task has been retried before, or its last
	// attempt was released.
	Retry *RetryContext
	// Skills found under <root>/.ralph/skills/*/SKILL.md.
	Skills []Skill
	// Feature is set when the task belongs to a feature the store knows.
	Feature   *FeatureContext
	Iteration int
	AgentID   string
	Root      string
	RalphBin  string
	// Peek is the peek markdown (peek prompt only).
	Peek string
	// AgentText is the working agent's final text (verify prompt only).
	AgentText string
	// Specs are the spec files the plan is made from (plan prompt only):
	// <root>/specs/*.md and every feature's spec, or the spec of the
	// feature being planned (PlanSpecs).
	Specs []SpecFile
	// Prompt is the text of the ad-hoc prompt file (prompt mode only).
	Prompt string
}

// SpecFile is one spec the plan prompt shows.
type SpecFile struct {
	// Path is the file's path relative to the project root, with slashes.
	Path    string
	Content string
	// Feature names the feature whose spec this is ("" for specs/*.md): the
	// planner gives the tasks it adds for it --feature Feature.
	Feature string
	// Plan is that feature's plan file, "" when it is missing, blank or
	// the stub `ralph feature add` writes (FeaturePlanStub).
	Plan string
}

// BlockerContext is a done blocker and its latest log message.
type BlockerContext struct {
	Task    Task
	Summary string
}

// RetryContext tells the agent that an earlier attempt did not succeed.
type RetryContext struct {
	// Count is the task's RetryCount (0 when the last attempt was released
	// without counting a retry: gate or agent trouble); MaxRetries the
	// configured limit.
	Count      int
	MaxRetries int
	// Reason is the latest fail, retry or release reason in the task's log.
	Reason string
}

// FeatureContext is a feature with the contents of its spec and plan files
// (empty when a file is missing).
type FeatureContext struct {
	Name string
	Spec string
	Plan string
}

// Prompt is a loaded, checked prompt template.
type Prompt struct {
	Name string
	// Source is "embedded" or the path of the override file.
	Source string
	tmpl   *template.Template
}

// SourceEmbedded is Prompt.Source for a built-in template.
const SourceEmbedded = "embedded"

// ErrPrompt is wrapped by prompt loading and rendering errors.
var ErrPrompt = errors.New("loop: prompt")

// LoadPrompt loads the named template: <root>/.ralph/prompts/<name>.md if
// it exists, the embedded one otherwise. An override that does not parse or
// names an unknown variable is an error naming the file and the variable;
// so is one that is a link, or lies below one (package safefile: an
// override linked to a secret would send it to the model's API).
func LoadPrompt(root, name string) (*Prompt, error) {
	path := filepath.Join(root, ".ralph", "prompts", name+".md")
	text, err := safefile.ReadFile(root, path)
	source := path
	if errors.Is(err, fs.ErrNotExist) {
		text, err = embeddedPrompts.ReadFile("prompts/" + name + ".md")
		source = SourceEmbedded
		if err != nil {
			return nil, fmt.Errorf("%w %s: no such template", ErrPrompt, name)
		}
	} else if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrPrompt, name, err)
	}
	return parsePrompt(name, source, string(text))
}

func parsePrompt(name, source, text string) (*Prompt, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrPrompt, source, err)
	}
	if t.Tree != nil {
		if err := checkFields(t.Tree.Root, reflect.TypeFor[PromptData](), reflect.TypeFor[PromptData]()); err != nil {
			return nil, fmt.Errorf("%w %s: %v", ErrPrompt, source, err)
		}
	}
	return &Prompt{Name: name, Source: source, tmpl: t}, nil
}

// Render executes the template.
func (p *Prompt) Render(data PromptData) (string, error) {
	var b bytes.Buffer
	if err := p.tmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("%w %s: %v", ErrPrompt, p.Source, err)
	}
	return b.String(), nil
}

// checkFields walks a template tree and reports the first field reference
// that PromptData does not have. dot is the type of "." at this point (nil
// when unknown, e.g. inside a range over a function's result); root is the
// type of "$".
func checkFields(n parse.Node, dot, root reflect.Type) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkFields(c, dot, root); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkFields(n.Pipe, dot, root)
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Cmds {
			if err := checkFields(c, dot, root); err != nil {
				return err
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if err := checkFields(a, dot, root); err != nil {
				return err
			}
		}
	case *parse.FieldNode:
		_, err := fieldType(dot, n.Ident)
		return err
	case *parse.VariableNode:
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			_, err := fieldType(root, n.Ident[1:])
			return err
		}
	case *parse.ChainNode:
		return checkFields(n.Node, dot, root)
	case *parse.IfNode:
		return checkBranch(&n.BranchNode, dot, dot, root)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode, pipeType(n.Pipe, dot, root), dot, root)
	case *parse.RangeNode:
		return checkBranch(&n.BranchNode, elemType(pipeType(n.Pipe, dot, root)), dot, root)
	case *parse.TemplateNode:
		return checkFields(n.Pipe, dot, root)
	}
	return nil
}

func checkBranch(b *parse.BranchNode, inner, outer, root reflect.Type) error {
	if err := checkFields(b.Pipe, outer, root); err != nil {
		return err
	}
	if err := checkFields(b.List, inner, root); err != nil {
		return err
	}
	return checkFields(b.ElseList, outer, root)
}

// pipeType is the type a pipeline yields when it is a lone field
// reference, else nil (unknown).
func pipeType(p *parse.PipeNode, dot, root reflect.Type) reflect.Type {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 || len(p.Decl) > 0 {
		return nil
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		t, _ := fieldType(dot, a.Ident)
		return t
	case *parse.DotNode:
		return dot
	case *parse.VariableNode:
		if a.Ident[0] == "$" {
			if len(a.Ident) == 1 {
				return root
			}
			t, _ := fieldType(root, a.Ident[1:])
			return t
		}
	}
	return nil
}

func elemType(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return t.Elem()
	}
	return nil
}

// fieldType follows a chain of field names from t. It returns nil, nil
// when t is unknown or dynamic (an interface, a map).
func fieldType(t reflect.Type, idents []string) (reflect.Type, error) {
	path := ""
	for _, id := range idents {
		path += "." + id
		if t == nil {
			return nil, nil
		}
		if m, ok := t.MethodByName(id); ok {
			t = methodResult(m.Type)
			continue
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if m, ok := reflect.PointerTo(t).MethodByName(id); ok {
			t = methodResult(m.Type)
			continue
		}
		switch t.Kind() {
		case reflect.Interface, reflect.Map:
			return nil, nil
		case reflect.Struct:
			f, ok := t.FieldByName(id)
			if !ok || !f.IsExported() {
				return nil, fmt.Errorf("unknown variable %s", path)
			}
			t = f.Type
		default:
			return nil, fmt.Errorf("unknown variable %s (%s has no fields)", path, t)
		}
	}
	return t, nil
}

func methodResult(ft reflect.Type) reflect.Type {
	if ft.NumOut() == 0 {
		return nil
	}
	return ft.Out(0)
}
