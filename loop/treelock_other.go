//go:build !unix || solaris || aix

package loop

import "os"

// treeLocks: there is no flock(2) here, and builds of one tree are not
// kept apart: the rule of one writing build per tree is the user's to keep
// (as holders are known by their leases alone, holder_other.go).
const treeLocks = false

// tryLock is never called where treeLocks is false.
func tryLock(*os.File, bool) (bool, error) { return true, nil }
