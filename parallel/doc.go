// Package parallel runs a build with several workers (ralph build
// --workers N, DESIGN §9): each worker a loop.Run in a git worktree of its
// own, done meaning merged into one integration branch per plan.
//
// The pool and the integration step are loop policy over a small seam,
// Git, whose real implementation (ExecGit) runs the git binary.
package parallel
