//go:build !linux

package agentproc

import "errors"

// Outside Linux, huge lines stay on the Go heap: there is no mremap to
// grow a mapping without copying it.

func mapMem(int) ([]byte, error)           { return nil, errors.ErrUnsupported }
func remapMem([]byte, int) ([]byte, error) { return nil, errors.ErrUnsupported }
func unmapMem([]byte)                      {}
func discardMem([]byte)                    {}
