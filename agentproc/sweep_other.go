//go:build !linux

package agentproc

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// sweep needs /proc: processes are told apart by their start times there.
func sweep(context.Context, time.Duration) (Swept, error) {
	return Swept{}, fmt.Errorf("agentproc: sweep: %w", errors.ErrUnsupported)
}
