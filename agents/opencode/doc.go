// Package opencode runs OpenCode (`opencode run --format json`) as a
// loop.Runner.
package opencode
