package hostgit

import "time"

// SetRacyWindow sets the racy window for a test and returns the old one.
func SetRacyWindow(d time.Duration) time.Duration {
	old := racyWindow
	racyWindow = d
	return old
}
