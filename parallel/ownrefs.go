package parallel

import (
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

var _ loop.RefOwner = (*workspace)(nil)

// OwnRef says which refs other workers' integrations move while this
// worker's verifier runs: the integration branch, ralph's task and attempt
// branches (refs/heads/ralph/…), the claims' fences (refs/ralph/…), and
// with a remote its remote-tracking refs. The verifier's guard neither counts nor undoes their moves; any
// other ref the verifier moves is put back and voids its verdict.
func (w *workspace) OwnRef(ref string) bool {
	switch {
	case ref == w.into, strings.HasPrefix(ref, "refs/heads/ralph/"), strings.HasPrefix(ref, ownRefs):
		return true
	case w.remote != "" && strings.HasPrefix(ref, "refs/remotes/"+w.remote+"/"):
		return true
	}
	return false
}
