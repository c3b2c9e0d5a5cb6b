package agentproc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// holderKey is how RALPH_HOLDER starts an entry of /proc/PID/environ.
var holderKey = []byte(loop.EnvHolder + "=")

// target is a leftover to stop: the process, pinned by a pidfd, and the
// start time it was found with.
type target struct {
	Leftover
	proc  *os.Process
	start int64
}

func sweep(ctx context.Context, grace time.Duration) (Swept, error) {
	liveness := map[string]loop.Liveness{} // by RALPH_HOLDER value
	targets, err := findLeftovers(func(value string) (loop.Holder, bool) {
		holder, herr := loop.ParseHolder(value)
		l, seen := liveness[value]
		if !seen {
			l = loop.HolderUnknown
			if herr == nil {
				l = holder.Liveness()
			}
			liveness[value] = l
		}
		return holder, l == loop.HolderGone
	})
	if err != nil {
		return Swept{}, err
	}
	host := loop.HostID()
	tag := hostTag(host)
	out := Swept{Processes: stopLeftovers(ctx, targets, grace)}
	files, ferr := sweepFiles(os.TempDir(), func(pid int, start int64, ftag string) bool {
		return ftag == tag && (loop.Holder{Host: host, PID: pid, Start: start}).Liveness() == loop.HolderGone
	})
	out.Files = files
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	if ferr != nil && !errors.Is(ferr, os.ErrNotExist) {
		return out, ferr
	}
	return out, nil
}

// stopLeftovers stops targets: SIGTERM and SIGCONT, then SIGKILL to those
// still there after grace (at once once ctx is cancelled), and waits a
// little (killWait) for them to go. It returns them, in order, and
// releases their pidfds.
func stopLeftovers(ctx context.Context, targets []*target, grace time.Duration) []Leftover {
	defer func() {
		for _, t := range targets {
			t.proc.Release()
		}
	}()
	var live []*target // signalled, not gone yet
	for _, t := range targets {
		if t.proc.Signal(syscall.SIGTERM) == nil {
			_ = t.proc.Signal(syscall.SIGCONT)
			live = append(live, t)
		}
	}
	stopped := slices.Clone(live)
	deadline := time.Now().Add(grace)
	for len(live) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
		live = slices.DeleteFunc(live, (*target).gone)
	}
	for _, t := range live {
		if t.proc.Signal(syscall.SIGKILL) == nil {
			t.Killed = true
		}
	}
	for deadline := time.Now().Add(killWait); len(live) > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		live = slices.DeleteFunc(live, (*target).gone)
	}
	var out []Leftover
	for _, t := range stopped {
		out = append(out, t.Leftover)
	}
	return out
}

// gone reports whether the process has exited (a zombie has).
func (t *target) gone() bool {
	start, err := loop.ProcessStart(t.PID)
	return err != nil || start != t.start
}

// findLeftovers makes one pass over /proc and returns the leftovers, each
// pinned by a pidfd, by pid: the processes of this user (never this
// process, its ancestors or pid 1) whose RALPH_HOLDER value gone says is
// a holder that is gone, and that started at or after that holder (see
// Sweep).
func findLeftovers(gone func(value string) (loop.Holder, bool)) ([]*target, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	spare := ancestors()
	uid := uint32(os.Geteuid())
	var found []*target
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || spare[pid] {
			continue
		}
		if fi, err := e.Info(); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uid {
			continue
		}
		// The start time before and after reading the environment: the
		// same, and the environment read is that process's.
		start, err := loop.ProcessStart(pid)
		if err != nil {
			continue
		}
		value, ok := environValue(pid, holderKey)
		if !ok {
			continue
		}
		holder, ok := gone(value)
		if !ok || start < holder.Start {
			continue
		}
		if again, err := loop.ProcessStart(pid); err != nil || again != start {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		// The pidfd pins the process; its start time, checked once more
		// now that the pidfd is open, says it is the one just read.
		proc, err := os.FindProcess(pid)
		if err != nil {
			continue
		}
		if again, err := loop.ProcessStart(pid); err != nil || again != start {
			proc.Release()
			continue
		}
		found = append(found, &target{
			Leftover: Leftover{PID: pid, Command: commandLine(cmdline), Holder: holder},
			proc:     proc,
			start:    start,
		})
	}
	slices.SortFunc(found, func(a, b *target) int { return a.PID - b.PID })
	return found, nil
}

// environValue returns the value of the entry of /proc/PID/environ that
// starts with key ("NAME=").
func environValue(pid int, key []byte) (string, bool) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return "", false
	}
	for len(env) > 0 {
		entry := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			entry, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if v, ok := bytes.CutPrefix(entry, key); ok {
			return string(v), true
		}
	}
	return "", false
}

// ancestors returns this process and its ancestors, by pid.
func ancestors() map[int]bool {
	out := map[int]bool{}
	for pid := os.Getpid(); pid > 0 && !out[pid]; {
		out[pid] = true
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			break
		}
		// pid (comm) state ppid …
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			break
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 2 {
			break
		}
		if pid, err = strconv.Atoi(f[1]); err != nil {
			break
		}
	}
	return out
}

// commandLine turns /proc/PID/cmdline into one line of at most 200 bytes.
func commandLine(cmdline []byte) string {
	s := strings.TrimRight(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})), " ")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// sweepFiles removes the TempFile files and TempDir directories in dir
// whose writer gone says is gone (its pid, start time and host tag), and
// returns their paths. Only regular files and directories of this user
// are removed; of directories, only the sandbox's scratch ones (kind
// "sandbox"), whole.
func sweepFiles(dir string, gone func(pid int, start int64, tag string) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	uid := uint32(os.Geteuid())
	var removed []string
	for _, e := range entries {
		pid, start, ftag, ok := tempWriter(e.Name())
		isDir := e.IsDir() && strings.HasPrefix(e.Name(), tempPrefix+"sandbox-")
		if !ok || !e.Type().IsRegular() && !isDir {
			continue
		}
		if fi, err := e.Info(); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uid {
			continue
		}
		if !gone(pid, start, ftag) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if isDir {
			removeAll(path)
			if _, err := os.Lstat(path); os.IsNotExist(err) {
				removed = append(removed, path)
			}
		} else if err := os.Remove(path); err == nil {
			removed = append(removed, path)
		}
	}
	return removed, nil
}
