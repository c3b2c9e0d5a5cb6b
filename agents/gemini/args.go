package gemini

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/safefile"
	"github.com/ralph-dev/ralph/sandbox"
)

// Name is the agent's name: the --agent-cli value and RunResult.Agent.
const Name = "gemini"

// EnvBin names the Gemini CLI executable when Runner.Path is empty.
const EnvBin = "RALPH_GEMINI"

// DefaultModel is the model of a request that names none: the CLI's own
// default when it does not route ("auto", which costs a routing call on
// another model before every turn).
const DefaultModel = "gemini-2.5-pro"

// Tiers maps the loop's model tiers to Gemini models. Any other model
// string is passed to the CLI as it is.
var Tiers = map[string]string{
	"opus":   "gemini-2.5-pro",
	"sonnet": "gemini-2.5-flash",
	"haiku":  "gemini-2.5-flash-lite",
}

// Model returns the CLI model for a requested one: a tier's model, the
// string itself, or DefaultModel for "".
func Model(requested string) string {
	if m, ok := Tiers[requested]; ok {
		return m
	}
	if requested == "" {
		return DefaultModel
	}
	return requested
}

// Bin finds the CLI executable: Bin.LookPath(path, env) takes path if not
// empty, else env ($RALPH_GEMINI's value), else `gemini` on PATH; a
// missing one is an *agentproc.NotFoundError (loop.ErrAgentNotFound).
var Bin = agentproc.Bin{Name: Name, EnvVar: EnvBin, Install: "install the Gemini CLI (npm install -g @google/gemini-cli)"}

// Args returns the CLI's arguments for req: stream-json output, the model
// (always given: see Model), contextDir as an included directory when the
// request has a system prompt (it holds the prompt as a context file; see
// WriteContext), and --yolo when yolo says so: a sandboxed work session.
// A session that is not sandboxed (the verifier) runs in the CLI's default approval mode,
// where headless runs offer the model only read tools. The prompt is not
// an argument: it goes on standard input (stdin that is not a terminal
// makes the CLI headless). yolo gives the session every tool (--yolo):
// Run passes req.Sandboxed, or true for a verifier that runs in a sandbox
// with its tree read-only (Runner.VerifierSandbox).
func Args(req loop.RunRequest, contextDir string, yolo bool) []string {
	a := []string{"--output-format", "stream-json", "-m", Model(req.Model)}
	if req.SystemPrompt != "" && contextDir != "" {
		a = append(a, "--include-directories", contextDir)
	}
	if yolo {
		a = append(a, "--yolo")
	}
	return a
}

// The environment variables Env sets.
const (
	// EnvNoRelaunch stops the CLI from relaunching itself as a child
	// Node process (to raise its heap limit): the parent ignores SIGTERM
	// and SIGINT, so ralph's stop would reach only the process that does
	// nothing.
	EnvNoRelaunch = "GEMINI_CLI_NO_RELAUNCH"
	// EnvTrustWorkspace trusts the working directory: in an untrusted
	// folder the CLI silently downgrades --yolo to the default approval
	// mode and ignores the project's settings and context files.
	EnvTrustWorkspace = "GEMINI_CLI_TRUST_WORKSPACE"
)

// Env returns the agent's environment: base (ralph's own) with req.Env on
// top (later entries win), plus GEMINI_CLI_NO_RELAUNCH=true and
// GEMINI_CLI_TRUST_WORKSPACE=true. The user's login, keys and settings are
// left as they are.
func Env(base []string, req loop.RunRequest) []string {
	extra := append(slices.Clip(req.Env), EnvNoRelaunch+"=true", EnvTrustWorkspace+"=true")
	return agentproc.Environ(base, extra, nil)
}

// stateDir is the CLI's own directory: $GEMINI_CLI_HOME/.gemini, else
// $HOME/.gemini (settings, history, project data, OAuth credentials).
func stateDir(env []string) string {
	home := agentproc.Getenv(env, "GEMINI_CLI_HOME")
	if home == "" {
		home = agentproc.Home(env)
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".gemini")
}

// StateDirs returns what the CLI writes besides the project and the temp
// dir: its ~/.gemini (see GEMINI_CLI_HOME), given the agent's
// environment. In a sandbox the agent works on a scratch copy of it
// (sandbox.State): settings.json (hooks, mcpServers, tool discovery and
// call commands), .env, GEMINI.md, trustedFolders.json, extensions/,
// commands/, skills/, agents/, policies/ and the checkpoint repositories
// in history/ are read-only or copies whose changes are dropped. Only its
// logins are the real files, writable (oauth_creds.json,
// gemini-credentials.json, google_accounts.json, mcp-oauth-tokens.json,
// a2a-oauth-tokens.json; it writes them in place). tmp/ (chats, logs,
// and the tools it downloads into tmp/bin) starts empty in the scratch.
func StateDirs(env []string) []sandbox.State {
	if d := stateDir(env); d != "" {
		return []sandbox.State{{Dir: d, Keep: geminiLogins, Fresh: []string{"tmp"}}}
	}
	return nil
}

// geminiLogins are the files of ~/.gemini that hold the CLI's logins.
var geminiLogins = []string{"oauth_creds.json", "gemini-credentials.json", "google_accounts.json", "mcp-oauth-tokens.json", "a2a-oauth-tokens.json"}

// DefaultContextFileName is the CLI's context file name unless its
// settings say otherwise (context.fileName).
const DefaultContextFileName = "GEMINI.md"

// ContextFileName returns the name the CLI loads context files by, for
// the agent's environment and working directory: the first of
// context.fileName in the system settings ($GEMINI_CLI_SYSTEM_SETTINGS_PATH
// or /etc/gemini-cli/settings.json), the project's .gemini/settings.json
// and the user's (in that order of precedence), else GEMINI.md. Settings
// that cannot be read count as absent, and so do those that are not a
// regular file (a FIFO would block ralph) or are larger than 1 MiB. The
// project's is the agent's to write: it is opened from dir without
// following a symbolic link (package safefile), so that a link there
// reads no file elsewhere; the system's and the user's are the user's,
// whose links are followed.
func ContextFileName(env []string, dir string) string {
	system := agentproc.Getenv(env, "GEMINI_CLI_SYSTEM_SETTINGS_PATH")
	if system == "" {
		system = "/etc/gemini-cli/settings.json"
	}
	opens := []func() (*os.File, error){func() (*os.File, error) { return openSettings(system) }}
	if dir != "" {
		opens = append(opens, func() (*os.File, error) { return safefile.Open(dir, filepath.Join(".gemini", "settings.json")) })
	}
	if d := stateDir(env); d != "" {
		opens = append(opens, func() (*os.File, error) { return openSettings(filepath.Join(d, "settings.json")) })
	}
	for _, open := range opens {
		if name := settingsFileName(open); name != "" {
			return name
		}
	}
	return DefaultContextFileName
}

// settingsMax bounds the settings files ContextFileName reads.
const settingsMax = 1 << 20

// openSettings opens the settings file path of the user's, following
// links, without blocking on a FIFO; it must be a regular file.
func openSettings(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("gemini: %s is not a regular file", path)
	}
	return f, nil
}

// lineCommentRE strips the // comments the CLI allows in settings.json
// (only those that start a line: a URL's // stays).
var lineCommentRE = regexp.MustCompile(`(?m)^\s*//.*$`)

// settingsFileName returns the first context.fileName of the settings
// file open opens, or "" (none, or a file that cannot be read, or is
// larger than settingsMax).
func settingsFileName(open func() (*os.File, error)) string {
	f, err := open()
	if err != nil {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, settingsMax+1))
	f.Close()
	if err != nil || len(b) > settingsMax {
		return ""
	}
	var s struct {
		Context struct {
			FileName json.RawMessage `json:"fileName"`
		} `json:"context"`
	}
	if json.Unmarshal(lineCommentRE.ReplaceAll(b, nil), &s) != nil {
		return ""
	}
	var one string
	if json.Unmarshal(s.Context.FileName, &one) == nil && one != "" {
		return filepath.Base(one)
	}
	var many []string
	if json.Unmarshal(s.Context.FileName, &many) == nil && len(many) > 0 && many[0] != "" {
		return filepath.Base(many[0])
	}
	return ""
}

// WriteContext writes ralph's system prompt into a new temporary
// directory as the CLI's context file (named by ContextFileName), for
// Args to include with --include-directories: the CLI then adds it to the
// session's context after its own system instruction and the project's
// context files. remove deletes the directory.
func WriteContext(prompt, fileName string) (dir string, remove func(), err error) {
	dir, err = os.MkdirTemp("", "ralph-gemini-context-")
	if err != nil {
		return "", nil, fmt.Errorf("gemini: system prompt: %w", err)
	}
	remove = func() { os.RemoveAll(dir) }
	if err := os.WriteFile(filepath.Join(dir, fileName), []byte(prompt), 0o600); err != nil {
		remove()
		return "", nil, fmt.Errorf("gemini: system prompt: %w", err)
	}
	return dir, remove, nil
}
