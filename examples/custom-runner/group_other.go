//go:build !unix

package main

import "os/exec"

// ownGroup leaves cmd as it is: outside Unix the command alone is killed
// when its context ends (ralph's own runners hold an agent's whole tree in
// a Job Object on Windows; see package agentproc).
func ownGroup(*exec.Cmd) {}

// killGroup has no group to kill outside Unix.
func killGroup(int) {}
