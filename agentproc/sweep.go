package agentproc

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// Leftover is a process that a ralph which is gone left behind, as Sweep
// found and stopped it.
type Leftover struct {
	PID int
	// Command is its command line, arguments joined by spaces, cut to 200
	// bytes.
	Command string
	// Holder is the loop it belonged to (its $RALPH_HOLDER), now gone.
	Holder loop.Holder
	// Killed says that it outlived SIGTERM and the grace period, and got
	// SIGKILL.
	Killed bool
}

// Swept is what Sweep did.
type Swept struct {
	// Processes are the processes stopped, by pid.
	Processes []Leftover
	// Files are the temporary files and directories removed (absolute
	// paths).
	Files []string
}

// Empty reports whether Sweep found nothing to do.
func (s Swept) Empty() bool { return len(s.Processes) == 0 && len(s.Files) == 0 }

// Sweep stops what a dead ralph on this host left behind, and removes its
// temporary files (ARCHITECTURE.md §2.2, §7.6). Call it when
// a run starts, before any agent of this process runs.
//
// A leftover is a process that carries RALPH_HOLDER (loop.EnvHolder) in its
// environment — every agent gets it from the loop, and every process the
// agent starts inherits it, even one that left the agent's process group —
// whose holder is gone (loop.HolderGone: on this host identity, no process
// has that pid and start time), and that started at or after that holder
// (a process that started earlier cannot descend from it). Only processes
// of this user are looked at; never this process, its ancestors or pid 1.
// A holder on another host, or one whose liveness cannot be told, is left
// alone, and so are its processes. Leftovers get SIGTERM and SIGCONT (a
// stopped process acts on SIGTERM only once it runs again), then SIGKILL
// when still there after grace (zero means DefaultGrace). Each is
// signalled through a pidfd opened before its start time was checked once
// more, so a pid reused in the meantime is never hit (kernels before 5.3
// have no pidfd: there the last check comes just before the signal).
//
// The temporary files are those TempFile writes (system prompt files,
// configuration files of agents), whose names carry the pid, start time
// and host of the process that wrote them (runners remove their own when
// they return): those of a writer that is gone are removed.
//
// Sweep reads /proc once, and the environment of this user's processes
// only. A cancelled ctx cuts the grace short (the rest get SIGKILL at once)
// and Sweep returns what it did with ctx's error. Outside Linux it does
// nothing and returns an error wrapping errors.ErrUnsupported.
func Sweep(ctx context.Context, grace time.Duration) (Swept, error) {
	if grace <= 0 {
		grace = DefaultGrace
	}
	return sweep(ctx, grace)
}

// TempFile writes content to a new temporary file in os.TempDir() named
// after this process — ralph-<kind>-<pid>-<start>-<host>-<random><suffix>,
// host a hash of the host identity, as /tmp may be shared by pid
// namespaces — so that Sweep removes it when this process dies before
// removing it. kind is one or more lowercase letters, digits or hyphens
// ("system-prompt", "config"); suffix may be empty or start with a dot,
// and holds no hyphen or slash. It returns the path and a func that
// removes the file.
func TempFile(kind, suffix, content string) (path string, remove func(), err error) {
	if !validKind(kind) || strings.ContainsAny(suffix, "-/") || suffix != "" && suffix[0] != '.' {
		return "", nil, fmt.Errorf("agentproc: temporary file kind %q, suffix %q: want a kind of [a-z0-9-] and a suffix like \".md\"", kind, suffix)
	}
	f, err := os.CreateTemp("", tempPattern(kind, suffix, loop.ThisProcess()))
	if err != nil {
		return "", nil, fmt.Errorf("agentproc: %s file: %w", kind, err)
	}
	path = f.Name()
	remove = func() { _ = os.Remove(path) }
	_, werr := f.WriteString(content)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		remove()
		return "", nil, fmt.Errorf("agentproc: %s file: %w", kind, werr)
	}
	return path, remove, nil
}

func validKind(kind string) bool {
	if kind == "" || kind[0] == '-' || kind[len(kind)-1] == '-' {
		return false
	}
	for _, c := range kind {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// tempPrefix starts the name of every file TempFile writes.
const tempPrefix = "ralph-"

// tempPattern is the os.CreateTemp pattern of a TempFile of the process
// me.
func tempPattern(kind, suffix string, me loop.Holder) string {
	return fmt.Sprintf("%s%s-%d-%d-%s-*%s", tempPrefix, kind, me.PID, me.Start, hostTag(me.Host), suffix)
}

// hostTag is a short, file-name-safe tag of a host identity: a temporary
// directory shared by containers (several pid namespaces) must not have
// one container's files taken for another's.
func hostTag(host string) string {
	h := fnv.New32a()
	h.Write([]byte(host))
	return fmt.Sprintf("%08x", h.Sum32())
}

// tempWriter returns the process that wrote the TempFile name (a base
// name), on the host whose tag the name carries; ok is false for other
// names, such as those of releases before the writer was named. Names
// of the system prompt files of earlier releases
// (ralph-system-prompt-<pid>-<start>-<host>-<random>.md) are TempFile
// names of kind system-prompt.
func tempWriter(name string) (pid int, start int64, tag string, ok bool) {
	rest, ok := strings.CutPrefix(name, tempPrefix)
	if !ok {
		return 0, 0, "", false
	}
	f := strings.Split(rest, "-")
	n := len(f)
	if n < 5 { // kind, pid, start, tag, random+suffix
		return 0, 0, "", false
	}
	random := f[n-1]
	digits := len(random) - len(strings.TrimLeft(random, "0123456789"))
	if digits == 0 || digits < len(random) && random[digits] != '.' {
		return 0, 0, "", false
	}
	tag = f[n-2]
	if len(tag) != 8 || strings.Trim(tag, "0123456789abcdef") != "" {
		return 0, 0, "", false
	}
	pid, err := strconv.Atoi(f[n-4])
	if err != nil || pid <= 0 {
		return 0, 0, "", false
	}
	start, err = strconv.ParseInt(f[n-3], 10, 64)
	if err != nil || start < 0 {
		return 0, 0, "", false
	}
	if !validKind(strings.Join(f[:n-4], "-")) {
		return 0, 0, "", false
	}
	return pid, start, tag, true
}
