//go:build !linux && !darwin

package sandbox

import (
	"fmt"
	"runtime"
)

func (b *Boundary) prepare(*Session, SessionParams, string) error {
	return fmt.Errorf("%w on %s", ErrUnavailable, runtime.GOOS)
}
