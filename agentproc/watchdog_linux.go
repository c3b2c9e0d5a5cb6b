package agentproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ralph-dev/ralph/loop"
)

// The watchdog is this program run again (/proc/self/exe) with argv[0]
// watchdogArg0 and the holder of the process that started it in
// envWatchdog; the init below turns such a process into the watchdog
// before any other package's init that comes after agentproc's, and
// before main. See the package documentation, "When ralph is killed".
const (
	envWatchdog  = "RALPH_AGENTPROC_WATCHDOG"
	watchdogArg0 = "ralph-watchdog"
)

// watchdogFD is the watchdog's end of its pipe: the first of ExtraFiles.
const watchdogFD = 3

// writeWait bounds a write to the watchdog's pipe: only a watchdog that
// stopped reading (stopped by a signal) fills it, and ralph never waits
// for one that long; it starts another.
const writeWait = time.Second

// parentWait bounds how long the watchdog waits, once its pipe is at its
// end, for the process that started it to be gone: a process that is
// being killed closes its files a moment before it is gone; one that is
// still there after this long has let the watchdog go (it started
// another) and is alive.
const parentWait = 2 * time.Second

// restartAfter is the shortest time between two starts of a watchdog.
const restartAfter = time.Second

func init() {
	if holder, ok := os.LookupEnv(envWatchdog); ok && len(os.Args) == 1 && os.Args[0] == watchdogArg0 {
		os.Exit(watchdogMain(holder))
	}
}

// dog is this process's watchdog.
var dog watchdog

// watchdog is ralph's side of its watchdog: the process, the pipe it
// reads, and what it has been told of the runs that have not ended.
type watchdog struct {
	mu      sync.Mutex
	cmd     *exec.Cmd // nil: none runs
	w       *os.File  // the write end of its pipe
	started time.Time // when cmd was started
	retry   time.Time // no start before then (after a failed one)
	// runs holds, for each run that has not ended, by marker, the lines
	// sent about it: a new watchdog is sent them all.
	runs map[string][]byte
}

// watch is one run's registration with the watchdog.
type watch struct{ marker string }

// watchRun tells the watchdog, starting it first when none runs, that a
// run with marker is about to start its agent, with grace between
// SIGTERM and SIGKILL.
func watchRun(marker string, grace time.Duration) watch {
	line := fmt.Appendf(nil, "+ %s %d\n", marker, grace)
	dog.mu.Lock()
	defer dog.mu.Unlock()
	if dog.runs == nil {
		dog.runs = map[string][]byte{}
	}
	dog.runs[marker] = line
	if dog.cmd == nil {
		dog.start() // sends every run's lines, this one's too
		return watch{marker}
	}
	dog.send(line)
	return watch{marker}
}

// started tells the watchdog the run's agent process (f is its family,
// just made): its pid and start time, and its pipes.
func (w watch) started(f *family) {
	b := fmt.Appendf(nil, "= %s %d %d", w.marker, f.agent, f.agentStart)
	for _, p := range f.pipes {
		b = append(append(b, ' '), p...)
	}
	b = append(b, '\n')
	dog.mu.Lock()
	defer dog.mu.Unlock()
	dog.runs[w.marker] = append(dog.runs[w.marker], b...)
	if dog.cmd != nil {
		dog.send(b)
	}
}

// end tells the watchdog that the run has ended: everything it started is
// gone, and nothing is left to stop.
func (w watch) end() {
	dog.mu.Lock()
	defer dog.mu.Unlock()
	delete(dog.runs, w.marker)
	if dog.cmd != nil {
		dog.send([]byte("- " + w.marker + "\n"))
	}
}

// send writes b to the watchdog (dog.mu held; one runs). A watchdog that
// cannot be written to is let go, and another is started if a run needs
// it.
func (d *watchdog) send(b []byte) {
	if err := d.write(b); err != nil {
		d.letGo()
		d.restart()
	}
}

// restart starts another watchdog if runs need one (dog.mu held; none
// runs): now, or restartAfter after the last start.
func (d *watchdog) restart() {
	if len(d.runs) == 0 {
		return
	}
	if time.Now().Before(d.retry) {
		time.AfterFunc(time.Until(d.retry), func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.cmd == nil && len(d.runs) > 0 {
				d.start()
			}
		})
		return
	}
	d.start()
}

func (d *watchdog) write(b []byte) error {
	_ = d.w.SetWriteDeadline(time.Now().Add(writeWait))
	_, err := d.w.Write(b)
	return err
}

// letGo closes the pipe of the watchdog that runs (dog.mu held): it finds
// this process alive at the end of its pipe, and exits doing nothing.
func (d *watchdog) letGo() {
	d.w.Close()
	d.cmd, d.w = nil, nil
}

// start starts a watchdog and sends it every run's lines (dog.mu held;
// none runs), unless one was started less than restartAfter ago. On
// failure there is none until the next run: runs go on without one, as
// outside Linux.
func (d *watchdog) start() {
	now := time.Now()
	if now.Before(d.retry) || !reexecutable() {
		return
	}
	d.retry = now.Add(restartAfter)
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{watchdogArg0}
	cmd.Env = watchdogEnv()
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{r}
	// A session of its own: no terminal, no signal for ralph's process
	// group or session reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return
	}
	d.cmd, d.w, d.started = cmd, w, now
	go func() {
		_ = cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		d.exited(cmd, ok && ws.Signaled())
	}()
	var all []byte
	for _, lines := range d.runs {
		all = append(all, lines...)
	}
	if len(all) > 0 {
		if err := d.write(all); err != nil {
			d.letGo()
		}
	}
}

// exited is told that the watchdog cmd has exited, killed by a signal or
// not. If it is the one that runs, another is started: when something
// killed it (an agent's `pkill ralph`), at once if runs need one, and a
// second after the last start at the soonest; when it exited by itself,
// which it does only if it cannot work here, at the next run a minute
// later at the soonest.
func (d *watchdog) exited(cmd *exec.Cmd, killed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != cmd {
		return // let go of before
	}
	d.letGo()
	if !killed {
		d.retry = time.Now().Add(time.Minute)
		return
	}
	d.restart()
}

// reexecutable reports whether this process's executable is the Go
// program that runs it, which the watchdog runs again: not when Go was
// built into a library that another program loaded (c-shared,
// c-archive), whose executable would be that program.
var reexecutable = sync.OnceValue(func() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return true
	}
	for _, s := range info.Settings {
		if s.Key == "-buildmode" {
			return s.Value == "exe" || s.Value == "pie"
		}
	}
	return true
})

// watchdogEnv is the watchdog's whole environment: the holder of this
// process, the temporary directory TempFile writes to, and no more — no
// marker, no RALPH_HOLDER, nothing a search of environments takes for an
// agent's.
func watchdogEnv() []string {
	gorace := "atexit_sleep_ms=0" // a -race binary sleeps 1 s at exit otherwise
	if v := os.Getenv("GORACE"); v != "" {
		gorace = v + " " + gorace
	}
	return []string{
		envWatchdog + "=" + loop.ThisProcess().String(),
		"TMPDIR=" + os.TempDir(),
		"GORACE=" + gorace,
	}
}

// watchedRun is what the watchdog knows of one run.
type watchedRun struct {
	marker string
	grace  time.Duration
	agent  int
	start  int64
	pipes  []string
}

// watchdogMain is the watchdog: it reads what ralph tells it of its runs
// until its pipe is at its end, which happens when ralph is gone (or has
// let it go), and then stops what ralph's runs and its holder left, as
// the next ralph's Sweep would, at once. Its exit code says nothing.
func watchdogMain(holderValue string) int {
	// Ctrl-C in ralph's terminal, or a SIGTERM or SIGHUP sent to ralph's
	// group, is not for the watchdog: it has work to do once ralph is
	// gone.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	// ps shows it so, not as "exe".
	_ = os.WriteFile("/proc/self/comm", []byte(watchdogArg0), 0)
	holder, err := loop.ParseHolder(holderValue)
	if err != nil || holder.IsZero() {
		return 2
	}
	parent := watchParent(holder)
	runs := readRuns(os.NewFile(watchdogFD, "ralph"))
	if !parent.gone(parentWait) {
		return 0 // let go of: ralph lives, and has another watchdog
	}
	stopRuns(holder, holderValue, runs)
	return 0
}

// readRuns reads ralph's lines to the end of the pipe and returns the
// runs that have not ended, by marker.
func readRuns(in *os.File) map[string]*watchedRun {
	runs := map[string]*watchedRun{}
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		f := bytes.Fields(lines.Bytes())
		if len(f) < 2 {
			continue
		}
		marker := string(f[1])
		switch string(f[0]) {
		case "+":
			r := &watchedRun{marker: marker, grace: DefaultGrace}
			if len(f) > 2 {
				if g, err := strconv.ParseInt(string(f[2]), 10, 64); err == nil && g > 0 {
					r.grace = time.Duration(g)
				}
			}
			runs[marker] = r
		case "=":
			r := runs[marker]
			if r == nil || len(f) < 4 {
				continue
			}
			r.agent, _ = strconv.Atoi(string(f[2]))
			r.start, _ = strconv.ParseInt(string(f[3]), 10, 64)
			for _, p := range f[4:] {
				r.pipes = append(r.pipes, string(p))
			}
		case "-":
			delete(runs, marker)
		}
	}
	return runs
}

// stopRuns stops, all at once, what the runs left and what carries the
// holder (see Sweep), and removes the holder's temporary files.
func stopRuns(holder loop.Holder, holderValue string, runs map[string]*watchedRun) {
	self := os.Getpid()
	selfExe, _ := os.Readlink("/proc/self/exe")
	grace := time.Duration(0)
	var wg sync.WaitGroup
	for _, r := range runs {
		grace = max(grace, r.grace)
		f := &family{
			agent:      r.agent,
			agentStart: r.start,
			marker:     []byte(EnvRun + "=" + r.marker),
			pipes:      r.pipes,
			self:       self,
			selfExe:    selfExe,
			known:      map[int]int64{},
			pinned:     map[int]*pin{},
			buf:        make([]byte, 0, 16<<10),
			watch:      true,
		}
		if r.agent == 0 {
			// Killed before it heard of the agent: only what carries
			// the marker is known to be the run's, and nothing started
			// before ralph carries it.
			f.agentStart = holder.Start
		}
		wg.Go(func() { f.reap(time.Now().Add(r.grace), false) })
	}
	if grace == 0 {
		grace = DefaultGrace
	}
	wg.Go(func() {
		tag := hostTag(holder.Host)
		_, _ = sweepFiles(os.TempDir(), func(pid int, start int64, ftag string) bool {
			return pid == holder.PID && start == holder.Start && ftag == tag
		})
		targets, err := findLeftovers(func(value string) (loop.Holder, bool) { return holder, value == holderValue })
		if err == nil {
			stopLeftovers(context.Background(), targets, grace)
		}
	})
	wg.Wait()
}

// parentProcess is the process that started the watchdog, pinned by a
// pidfd where there is one.
type parentProcess struct {
	holder loop.Holder
	fd     int  // -1 without one
	exited bool // known to be gone already
}

// watchParent pins the process holder names, which started this one.
func watchParent(holder loop.Holder) parentProcess {
	p := parentProcess{holder: holder, fd: -1}
	fd, err := unix.PidfdOpen(holder.PID, 0)
	if err == nil {
		p.fd = fd
	}
	// Gone before the watchdog looked?
	start, err := loop.ProcessStart(holder.PID)
	p.exited = errors.Is(err, os.ErrNotExist) || err == nil && holder.Start != 0 && start != holder.Start
	return p
}

// gone waits up to wait for the parent to be gone (a zombie is), and
// reports whether it is.
func (p parentProcess) gone(wait time.Duration) bool {
	if p.exited {
		return true
	}
	if p.fd >= 0 {
		fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		deadline := time.Now().Add(wait)
		for {
			n, err := unix.Poll(fds, int(max(0, time.Until(deadline).Milliseconds())))
			if err == unix.EINTR && time.Now().Before(deadline) {
				continue
			}
			return n > 0
		}
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(5 * time.Millisecond) {
		start, err := loop.ProcessStart(p.holder.PID)
		if errors.Is(err, os.ErrNotExist) || err == nil && start != p.holder.Start {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
