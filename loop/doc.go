// Package loop holds ralph's domain: tasks and their statuses, the TaskStore
// and Runner seams that backends implement, and (in later work) the build
// loop's state machine, prompts, strategies and gates.
//
// loop imports only the standard library, package sigil and looplab/fsm:
// embedding it never drags in SQLite or process code. The SQLite task graph
// lives in package dag, the Claude Code runner in package claude, and fakes
// for tests in package looptest.
package loop
