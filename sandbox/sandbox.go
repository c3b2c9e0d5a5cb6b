package sandbox

import "errors"

// ErrUnavailable is returned by Find when this system cannot sandbox an
// agent: the operating system has no supported tool, the tool is not
// installed, or it does not run here. The error that wraps it says what to
// install or change.
var ErrUnavailable = errors.New("sandbox: not available")

// Sandbox is the tool that confines an agent: bwrap (bubblewrap) on
// Linux, sandbox-exec on macOS. Get one with Find, then a Boundary for a
// project; it holds no state of a run and is safe for concurrent use.
type Sandbox struct {
	// Path is the tool's executable, absolute.
	Path string
}

// Find locates the sandbox tool of this operating system on PATH and, on
// Linux, checks that it runs here (bubblewrap needs user namespaces when
// ralph is not root). Its error wraps ErrUnavailable and says how to
// install or enable the tool.
func Find() (*Sandbox, error) { return find() }
