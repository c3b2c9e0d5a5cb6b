package loop

// Checkout is where the git checkout an agent worked with started and where
// it ended (ARCHITECTURE.md §7): a sandboxed agent works with a private
// copy of the git metadata, so its commits, resets and checkouts change
// nothing ralph reads, and ralph takes its work from the tree's files
// alone. What ralph does learn is how the agent's HEAD moved, so that an
// agent's `git reset --hard HEAD~1` is not taken for a deletion of work
// already landed.
//
// A runner that gave its agent such a checkout reports it in
// RunResult.Checkout; the loop hands it to the Workspace with the
// attempt's work (IntegrateRequest.Checkout). Nil means the runner knows
// nothing of the kind: the workspace reads the tree's own git metadata.
type Checkout struct {
	// Start is the commit the checkout's HEAD named when the session
	// began.
	Start string
	// End is the commit its HEAD named when the session ended ("" when
	// HEAD named no commit, or one that could not be read).
	End string
	// Descends says that End is Start or a descendant of it: the agent
	// only added commits on top of where it began (the usual case). The
	// runner decides it while the agent's private objects, which hold
	// the commits the agent made, are still there.
	Descends bool
}
