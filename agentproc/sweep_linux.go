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
	var out Swept
	targets, err := findLeftovers()
	if err != nil {
		return out, err
	}
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
	for _, t := range stopped {
		out.Processes = append(out.Processes, t.Leftover)
	}
	files, ferr := sweepFiles(os.TempDir())
	out.Files = files
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	if ferr != nil && !errors.Is(ferr, os.ErrNotExist) {
		return out, ferr
	}
	return out, nil
}

// gone reports whether the process has exited (a zombie has).
func (t *target) gone() bool {
	start, err := loop.ProcessStart(t.PID)
	return err != nil || start != t.start
}

// findLeftovers makes one pass over /proc and returns the leftovers (see
// Sweep), each pinned by a pidfd, by pid.
func findLeftovers() ([]*target, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	spare := ancestors()
	uid := uint32(os.Geteuid())
	liveness := map[string]loop.Liveness{} // by RALPH_HOLDER value
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
		l, seen := liveness[value]
		holder, herr := loop.ParseHolder(value)
		if !seen {
			l = loop.HolderUnknown
			if herr == nil {
				l = holder.Liveness()
			}
			liveness[value] = l
		}
		if l != loop.HolderGone || start < holder.Start {
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
// whose writer is gone (on this host identity), and returns their paths.
// Only regular files and directories of this user are removed; of
// directories, only the sandbox's scratch ones (kind "sandbox"), whole.
func sweepFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	host := loop.HostID()
	tag := hostTag(host)
	uid := uint32(os.Geteuid())
	var removed []string
	for _, e := range entries {
		pid, start, ftag, ok := tempWriter(e.Name())
		isDir := e.IsDir() && strings.HasPrefix(e.Name(), tempPrefix+"sandbox-")
		if !ok || ftag != tag || !e.Type().IsRegular() && !isDir {
			continue
		}
		if fi, err := e.Info(); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uid {
			continue
		}
		if (loop.Holder{Host: host, PID: pid, Start: start}).Liveness() != loop.HolderGone {
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
