//go:build !unix

package safefile_test

import "errors"

func mkfifo(string) error { return errors.ErrUnsupported }
