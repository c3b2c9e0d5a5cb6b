//go:build !linux

package serve

import "context"

// watchFiles reports changes of the database file and of the sessions'
// event logs by looking at them every second (no inotify here).
func watchFiles(ctx context.Context, dbPath, base, logDir string, changes chan<- change, ready func()) {
	pollFiles(ctx, dbPath, base, logDir, changes, ready)
}
