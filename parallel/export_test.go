package parallel

import (
	"sync"

	"github.com/ralph-dev/ralph/loop"
)

// NewWorkspace is the workspace of worker name in dir, integrating into
// into (a full ref) and recording its landings in store, for the external
// tests and benchmarks.
func NewWorkspace(g Git, store loop.LandingStore, dir, name, into string) loop.Workspace {
	return &workspace{git: g, dir: dir, worker: name, into: into, land: &sync.Mutex{},
		guard: &tipGuard{git: g, store: store, into: into}}
}
