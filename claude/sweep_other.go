//go:build !linux

package claude

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// sweep needs /proc: processes are told apart by their start times there.
func sweep(context.Context, time.Duration) (Swept, error) {
	return Swept{}, fmt.Errorf("claude: sweep: %w", errors.ErrUnsupported)
}
