//go:build !unix

package loop

import "os/exec"

// inGroup does nothing where there are no process groups: cancellation
// kills the command alone.
func inGroup(*exec.Cmd) {}

// killGroup does nothing where there are no process groups.
func killGroup(*exec.Cmd) {}
