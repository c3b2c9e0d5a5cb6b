//go:build !unix

package hostgit_test

import "errors"

func mkfifo(string) error { return errors.ErrUnsupported }
