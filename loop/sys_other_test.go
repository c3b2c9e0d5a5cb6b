//go:build !unix

package loop_test

import "errors"

func mkfifo(string) error { return errors.ErrUnsupported }
