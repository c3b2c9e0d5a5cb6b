//go:build !unix

package gemini

import "errors"

func mkfifo(string) error { return errors.ErrUnsupported }

// maxRSSMB is not known outside Unix.
func maxRSSMB() int64 { return 0 }
