package loop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ralph-dev/ralph/safefile"
)

// logBase is the trusted directory the logs in logDir are opened from
// (package safefile, ARCHITECTURE.md §7): root, when logDir lies inside it (the
// default <root>/.ralph/logs), so that a .ralph or .ralph/logs replaced
// by a link is refused; else logDir itself, which the caller named.
func logBase(root, logDir string) string {
	if abs, err := filepath.Abs(logDir); err == nil {
		logDir = abs
	}
	return safefile.Within(root, logDir, logDir)
}

// makeLogDir makes dir (a log directory, or a session's raw-log
// directory) below base without following a link; a missing base is made
// as named first.
func makeLogDir(base, dir string) error {
	if _, err := os.Stat(base); errors.Is(err, fs.ErrNotExist) {
		// base is trusted (the project root, or a LogDir named outside
		// it): made as named.
		if err := os.MkdirAll(base, 0o755); err != nil {
			return err
		}
	}
	return safefile.MkdirAll(base, dir, 0o755)
}

// openSessionLog creates the session log at path below base (and its
// directory), replacing one of that name: whatever is there — a link
// included — is removed, not followed, and the log is created anew
// (O_EXCL). base "" trusts path's own directory.
func openSessionLog(base, path string) (*SessionLog, error) {
	base, path, err := bases(base, path)
	if err != nil {
		return nil, fmt.Errorf("loop: session log: %w", err)
	}
	if err := makeLogDir(base, filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("loop: session log: %w", err)
	}
	var f *os.File
	for range 4 {
		if f, err = safefile.Create(base, path, 0o644); !errors.Is(err, fs.ErrExist) {
			break
		}
		if err = safefile.Remove(base, path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			break
		}
		err = fs.ErrExist
	}
	if err != nil {
		return nil, fmt.Errorf("loop: session log: %w", err)
	}
	l := NewSessionLog(f)
	l.c = f
	return l, nil
}

// openEventLog opens the event log at path below base for appending,
// creating it and its directory if needed; an existing one must be a
// regular file with a single name, not a link. base "" trusts path's own
// directory.
func openEventLog(base, path string) (*EventLog, error) {
	base, path, err := bases(base, path)
	if err != nil {
		return nil, fmt.Errorf("loop: event log: %w", err)
	}
	if err := makeLogDir(base, filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("loop: event log: %w", err)
	}
	f, err := safefile.Append(base, path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("loop: event log: %w", err)
	}
	return &EventLog{w: f, c: f}, nil
}

// bases returns path absolute, and base absolute ("": path's directory).
func bases(base, path string) (string, string, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	if base == "" {
		return filepath.Dir(path), path, nil
	}
	base, err = filepath.Abs(base)
	return base, path, err
}

// rawLogNotice is the notice of a raw stream log the runner did not write
// (a link refused) or stopped writing (a full disk).
func rawLogNotice(path string, cause error) string {
	if errors.Is(cause, safefile.ErrLink) {
		return fmt.Sprintf("the raw stream log was not written: %v (ralph follows no link in its log directory); the session ran without it", cause)
	}
	var pe *fs.PathError
	if errors.As(cause, &pe) {
		path, cause = pe.Path, pe.Err
	}
	return fmt.Sprintf("the raw stream log %s could not be written: %v; the rest of the stream is lost from it", path, cause)
}
