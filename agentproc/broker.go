package agentproc

import (
	"context"
	"slices"
	"strings"

	"github.com/ralph-dev/ralph/broker"
	"github.com/ralph-dev/ralph/loop"
)

// withheldEnv are the variables a sandboxed agent never gets: the plan's
// database (RALPH_DB may hold a password, and the agent reaches the plan
// through its broker), the token of `ralph serve`, and GitHub's tokens
// (gh's and git's, github.com's and GitHub Enterprise's).
var withheldEnv = map[string]bool{
	"RALPH_DB":                true,
	"RALPH_SERVE_TOKEN":       true,
	"GH_TOKEN":                true,
	"GITHUB_TOKEN":            true,
	"GH_ENTERPRISE_TOKEN":     true,
	"GITHUB_ENTERPRISE_TOKEN": true,
}

// withheldPrefixes are the families of variables a sandboxed agent never
// gets: every PostgreSQL client variable (PGPASSWORD, PGPASSFILE,
// PGSERVICE, PGSERVICEFILE, PGSSLKEY, … and those libpq adds later).
var withheldPrefixes = []string{"PG"}

// Withheld reports whether a sandboxed agent is denied the environment
// variable key (see the package documentation, "What a sandboxed agent is
// not given").
func Withheld(key string) bool {
	if withheldEnv[key] {
		return true
	}
	for _, p := range withheldPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// notOwnKey reports whether k is another provider's API key than the
// agent's own (Spec.OwnKeys).
func (s Spec) notOwnKey(k string) bool {
	return s.OwnKeys != nil && APIKey(k) && !slices.Contains(s.OwnKeys, k)
}

// agentEnv is the environment the agent starts with: s.Env without an
// inherited RALPH_SOCKET (the socket of an outer session is not this
// agent's), and for a sandboxed agent without what Withheld names, nor
// other providers' keys than its own (OwnKeys), and with RALPH_SOCKET set
// to socket when it has a broker.
func agentEnv(s Spec, socket string) []string {
	out := make([]string, 0, len(s.Env)+1)
	for _, kv := range s.Env {
		k, _, _ := strings.Cut(kv, "=")
		if k == broker.EnvSocket || s.Sandbox != nil && (Withheld(k) || s.notOwnKey(k)) {
			continue
		}
		out = append(out, kv)
	}
	if socket != "" {
		out = append(out, broker.EnvSocket+"="+socket)
	}
	return out
}

// sessionBroker serves the plan to one sandboxed agent (Spec.Plan) for the
// life of its session. A nil *sessionBroker is no broker.
type sessionBroker struct {
	srv    *broker.Server
	cancel context.CancelFunc
	done   chan error
}

// startBroker listens on a socket of the session's own, in a directory
// of its own in the session's scratch directory (which Sweep removes,
// socket and all, when this process is killed before removing it), and
// serves plan on it until close, or until ctx is cancelled. Where the
// scratch's path would make the socket's too long for a Unix socket, the
// directory goes in the temp directory or /tmp, as broker.Listen chooses.
func startBroker(ctx context.Context, plan *loop.PlanAccess, scratch string) (*sessionBroker, error) {
	srv, err := broker.Listen(scratch, *plan)
	if err != nil {
		if srv, err = broker.Listen("", *plan); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	b := &sessionBroker{srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- srv.Serve(ctx) }()
	return b, nil
}

// socket is the socket's path, "" without a broker.
func (b *sessionBroker) socket() string {
	if b == nil {
		return ""
	}
	return b.srv.Path()
}

// admit lets the agent's process, and what it starts, connect. An agent
// gone already cannot connect anyway: the error says no more.
func (b *sessionBroker) admit(pid int) {
	if b != nil {
		_ = b.srv.Admit(pid)
	}
}

// close stops serving, once the session has ended, and removes the
// socket.
func (b *sessionBroker) close() {
	if b == nil {
		return
	}
	b.cancel()
	b.srv.Close()
	<-b.done
}
