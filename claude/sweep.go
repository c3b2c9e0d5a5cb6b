package claude

import (
	"context"
	"fmt"
	"hash/fnv"
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
	// Files are the temporary files removed (absolute paths).
	Files []string
}

// Empty reports whether Sweep found nothing to do.
func (s Swept) Empty() bool { return len(s.Processes) == 0 && len(s.Files) == 0 }

// Sweep stops what a dead ralph on this host left behind, and removes its
// temporary files (DESIGN §8, "Holders", "Claim generations"). Call it when
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
// The temporary files are the system prompt files Run writes, whose names
// carry the pid, start time and host of the process that wrote them
// (Run removes its own when it returns): those of a writer that is gone are
// removed.
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

// The system prompt file's name: the prefix, then the writer's pid, start
// time and host tag, then os.CreateTemp's random part and the suffix:
// ralph-system-prompt-<pid>-<start>-<host>-<random>.md.
const (
	systemPromptPrefix = "ralph-system-prompt-"
	systemPromptSuffix = ".md"
)

// systemPromptPattern is the os.CreateTemp pattern of the system prompt
// file written by the process me.
func systemPromptPattern(me loop.Holder) string {
	return fmt.Sprintf("%s%d-%d-%s-*%s", systemPromptPrefix, me.PID, me.Start, hostTag(me.Host), systemPromptSuffix)
}

// hostTag is a short, file-name-safe tag of a host identity: a temporary
// directory shared by containers (several pid namespaces) must not have
// one container's files taken for another's.
func hostTag(host string) string {
	h := fnv.New32a()
	h.Write([]byte(host))
	return fmt.Sprintf("%08x", h.Sum32())
}

// systemPromptWriter returns the process that wrote the system prompt file
// name (a base name), on the host whose tag the name carries; ok is false
// for other names, such as those of releases before the writer was named.
func systemPromptWriter(name string) (pid int, start int64, tag string, ok bool) {
	rest, ok := strings.CutPrefix(name, systemPromptPrefix)
	if !ok || !strings.HasSuffix(rest, systemPromptSuffix) {
		return 0, 0, "", false
	}
	f := strings.Split(strings.TrimSuffix(rest, systemPromptSuffix), "-")
	if len(f) != 4 {
		return 0, 0, "", false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0, 0, "", false
	}
	start, err = strconv.ParseInt(f[1], 10, 64)
	if err != nil || start < 0 {
		return 0, 0, "", false
	}
	return pid, start, f[2], true
}
