package loop

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The environment variables of holder identity (ARCHITECTURE.md §2.2, §4).
const (
	// EnvHolder is given to every agent process: the Holder of the loop
	// that runs it, as Holder.String writes it. A claim the agent makes
	// with `$RALPH_BIN task claim` takes its holder from it; the sweep of
	// a later run finds a dead loop's leftover processes by it.
	EnvHolder = "RALPH_HOLDER"
	// EnvHostID, when set, replaces the host identity (tests simulate
	// machines with it).
	EnvHostID = "RALPH_HOST_ID"
)

// Holder names the process that keeps a claim alive: the ralph loop that
// runs the agent (ARCHITECTURE.md §2.2). Host, PID and Start together name
// one process, whatever pid reuse: a pid that runs again with another start
// time is another process.
type Holder struct {
	// Host is the host identity: on Linux the boot id and the pid
	// namespace (two containers on one kernel share a boot id, not a pid
	// namespace), elsewhere the host name; $RALPH_HOST_ID overrides it.
	Host string
	// PID is the process id, in Host's pid namespace.
	PID int
	// Start is the process's start time: on Linux in clock ticks since
	// boot (field 22 of /proc/PID/stat); 0 where it cannot be read.
	Start int64
}

// IsZero reports whether h names no process (a claim made by hand, with a
// lease only).
func (h Holder) IsZero() bool { return h == Holder{} }

// String is the RALPH_HOLDER form: "PID:START@HOST"; "" for the zero
// Holder.
func (h Holder) String() string {
	if h.IsZero() {
		return ""
	}
	return strconv.Itoa(h.PID) + ":" + strconv.FormatInt(h.Start, 10) + "@" + h.Host
}

// ParseHolder parses the String form. An empty string is the zero Holder.
func ParseHolder(s string) (Holder, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Holder{}, nil
	}
	proc, host, ok := strings.Cut(s, "@")
	pid, start, ok2 := strings.Cut(proc, ":")
	if !ok || !ok2 || host == "" {
		return Holder{}, fmt.Errorf("loop: holder %q: want PID:START@HOST", s)
	}
	h := Holder{Host: host}
	var err error
	if h.PID, err = strconv.Atoi(pid); err != nil || h.PID <= 0 {
		return Holder{}, fmt.Errorf("loop: holder %q: bad pid", s)
	}
	if h.Start, err = strconv.ParseInt(start, 10, 64); err != nil || h.Start < 0 {
		return Holder{}, fmt.Errorf("loop: holder %q: bad start time", s)
	}
	return h, nil
}

// Liveness says what can be known of a holder process from here.
type Liveness int

const (
	// HolderUnknown: the holder runs on another host (or this system
	// cannot tell); only its lease says whether its claim still stands.
	HolderUnknown Liveness = iota
	// HolderAlive: the process runs on this host with the recorded start
	// time.
	HolderAlive
	// HolderGone: on this host, no process has that pid and start time.
	HolderGone
)

func (l Liveness) String() string {
	switch l {
	case HolderAlive:
		return "alive"
	case HolderGone:
		return "gone"
	}
	return "unknown"
}

// Liveness checks h against this host's processes. The zero Holder is
// HolderUnknown: a claim without a holder process lives by its lease.
func (h Holder) Liveness() Liveness {
	// Start 0: the start time could not be read (no /proc), so a pid alone
	// would have to decide, and pids are reused.
	if h.IsZero() || h.Host != HostID() || h.Start == 0 {
		return HolderUnknown
	}
	start, err := ProcessStart(h.PID)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return HolderGone
	case errors.Is(err, errors.ErrUnsupported):
		return HolderUnknown
	case err != nil:
		return HolderUnknown
	case start != h.Start:
		return HolderGone // the pid was reused
	}
	return HolderAlive
}

// ThisProcess returns the Holder of the calling process. It is computed
// once; $RALPH_HOST_ID is read then.
func ThisProcess() Holder { return thisProcess() }

var thisProcess = sync.OnceValue(func() Holder {
	pid := os.Getpid()
	start, _ := ProcessStart(pid)
	return Holder{Host: HostID(), PID: pid, Start: start}
})

// HostID is this host's identity: $RALPH_HOST_ID when set, else the
// system's (see Holder.Host).
func HostID() string {
	if id := strings.TrimSpace(os.Getenv(EnvHostID)); id != "" {
		return id
	}
	return systemHostID()
}

var systemHostID = sync.OnceValue(readHostID)
