//go:build !linux

package agentproc

import "time"

// watch does nothing outside Linux: there is no watchdog (see the package
// documentation, "When ralph is killed").
type watch struct{}

func watchRun(string, time.Duration) watch { return watch{} }

func (watch) started(*family) {}

func (watch) end() {}
