package agentproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procInfo is what one read of /proc/PID/stat says about a process.
type procInfo struct {
	pid, ppid, pgrp int
	zombie          bool  // state Z or X: exited, not reaped yet
	start           int64 // clock ticks since boot
}

// family finds and stops the processes of one run: the agent's process
// group, every process that carries the run's marker, every descendant of
// the agent, and every orphan re-parented to this process (a subreaper)
// that holds the agent's pipes. See the package documentation, "Nothing
// outlives the agent".
type family struct {
	agent      int    // the agent's pid, which is its process group's id
	agentStart int64  // its start time: nothing older is the agent's
	marker     []byte // EnvRun=<value>
	pipes      []string
	self       int
	selfExe    string
	// known are the processes found to be the agent's, by pid, with their
	// start times: once re-parented to this process and without a
	// readable environment (a zombie, or one that cleared it), they are
	// told by this record.
	known  map[int]int64
	pinned map[int]*pin
	buf    []byte // reused for /proc reads
	// watch says that this family is stopped by the watchdog of a ralph
	// that is gone (see watchdog_linux.go), not by the Run that started
	// it: the agent itself is one of the processes to stop, and a
	// process that holds the agent's pipes is the run's whoever its
	// parent is now (the orphans re-parented to ralph went to another
	// reaper when ralph died).
	watch bool
}

// pin is a process found to be the agent's, pinned by a pidfd so that a
// pid reused in the meantime is never signalled.
type pin struct {
	fd     int // -1 without pidfd (kernels before 5.3)
	pid    int
	start  int64
	termed bool
	killed bool
}

// newFamily returns the family of the agent that was just started (and
// not waited for yet: its start time is still readable). pipes are the
// read ends of its standard output and error.
func newFamily(agent int, marker string, pipes ...*os.File) *family {
	f := &family{
		agent:  agent,
		marker: []byte(EnvRun + "=" + marker),
		self:   os.Getpid(),
		known:  map[int]int64{},
		pinned: map[int]*pin{},
		buf:    make([]byte, 0, 16<<10),
	}
	if info, ok := f.stat(agent); ok {
		f.agentStart = info.start
	}
	f.selfExe, _ = os.Readlink("/proc/self/exe")
	for _, p := range pipes {
		var st syscall.Stat_t
		if syscall.Fstat(int(p.Fd()), &st) == nil {
			f.pipes = append(f.pipes, fmt.Sprintf("pipe:[%d]", st.Ino))
		}
	}
	return f
}

// snapshot records the agent's descendants while it still runs: a process
// that cleared its environment and left the group is then known by its
// ancestry after its parent is gone.
func (f *family) snapshot() { f.find() }

// term records the agent's descendants (see snapshot) and stops them and
// the agent's group (SIGTERM, SIGCONT; see termAll).
func (f *family) term() {
	alive, _, _ := f.find()
	f.termAll(alive, f.agent)
}

// kill sends SIGKILL to the agent's group and every process of the
// family, all stopped first (see termAll).
func (f *family) kill() {
	alive, _, _ := f.find()
	signalGroup(f.agent, syscall.SIGSTOP)
	f.killAll(alive)
	signalGroup(f.agent, syscall.SIGKILL)
}

// reap stops every process of the family once the agent has exited:
// SIGTERM and SIGCONT (unless termed: it was sent already), SIGKILL if
// still there at killAt, and it reaps the zombies re-parented to this
// process, by pid. It passes over /proc until it finds none, at most
// killWait after the SIGKILL. A pass that finds nothing — the usual
// case — costs one read of /proc and of the stat of each process. A pass
// that finds only orphans caught in the middle of an exec (see find) is
// not trusted: it looks again, for up to unsureWait.
func (f *family) reap(killAt time.Time, _ bool) {
	defer f.release()
	var giveUp, unsureUntil time.Time
	for pause := time.Millisecond; ; pause = min(2*pause, 10*time.Millisecond) {
		alive, zombies, unsure := f.find()
		for _, z := range zombies {
			var ws unix.WaitStatus
			// Only pids found to be the agent's, re-parented to this
			// process: never wait4(-1), which would take exec.Cmd's
			// children from it.
			_, _ = unix.Wait4(z.pid, &ws, unix.WNOHANG, nil)
		}
		now := time.Now()
		if len(alive) == 0 && len(zombies) == 0 {
			if unsure == 0 {
				return
			}
			if unsureUntil.IsZero() {
				unsureUntil = now.Add(unsureWait)
			}
			if now.After(unsureUntil) {
				return
			}
			time.Sleep(pause)
			continue
		}
		if giveUp.IsZero() && !now.Before(killAt) {
			giveUp = now.Add(killWait)
		}
		if !giveUp.IsZero() && now.After(giveUp) {
			return
		}
		if giveUp.IsZero() {
			f.termAll(alive, 0) // once each: not again when termed
		} else {
			f.killAll(alive)
		}
		if len(alive) > 0 {
			time.Sleep(pause)
		}
	}
}

// unsureWait bounds how long reap looks again at orphans caught in the
// middle of an exec: an exec takes microseconds to milliseconds, so only a
// process that empties its own arguments and environment keeps reap
// waiting this long.
const unsureWait = 2 * time.Second

// termAll sends SIGTERM and SIGCONT (a stopped process acts on SIGTERM
// only once it runs again) to the processes ps not sent it yet, and to the
// process group pgid if not 0. They are stopped (SIGSTOP) first, and
// continued only once each has its SIGTERM: signalled one by one, a
// process could act on another's death before its own SIGTERM comes — a
// shell whose sleep is killed runs its next command at once.
func (f *family) termAll(ps []procInfo, pgid int) {
	var batch []*pin
	for _, p := range ps {
		if pn := f.pin(p); pn != nil && !pn.termed {
			pn.termed = true
			batch = append(batch, pn)
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGTERM, syscall.SIGCONT} {
		if pgid > 0 {
			signalGroup(pgid, sig)
		}
		for _, pn := range batch {
			pn.send(sig)
		}
	}
}

// killAll sends SIGKILL to the processes ps not sent it yet, all stopped
// first (see termAll).
func (f *family) killAll(ps []procInfo) {
	var batch []*pin
	for _, p := range ps {
		if pn := f.pin(p); pn != nil && !pn.killed {
			pn.killed = true
			batch = append(batch, pn)
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		for _, pn := range batch {
			pn.send(sig)
		}
	}
}

// pin returns p's pin, pinning it first (nil when it is gone).
func (f *family) pin(p procInfo) *pin {
	pn := f.pinned[p.pid]
	if pn != nil && pn.start != p.start { // the pid was reused
		pn.close()
		pn = nil
	}
	if pn != nil {
		return pn
	}
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil && !errors.Is(err, unix.ENOSYS) {
		return nil // gone
	}
	if err != nil {
		fd = -1
	}
	// The start time once more, now that the pidfd holds the process: it
	// is the one found.
	if again, ok := f.stat(p.pid); !ok || again.start != p.start {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil
	}
	pn = &pin{fd: fd, pid: p.pid, start: p.start}
	f.pinned[p.pid] = pn
	return pn
}

func (pn *pin) send(sig syscall.Signal) {
	if pn.fd >= 0 {
		_ = unix.PidfdSendSignal(pn.fd, sig, nil, 0)
	} else {
		_ = syscall.Kill(pn.pid, sig)
	}
}

// release closes the pins.
func (f *family) release() {
	for pid, pn := range f.pinned {
		pn.close()
		delete(f.pinned, pid)
	}
}

func (pn *pin) close() {
	if pn.fd >= 0 {
		unix.Close(pn.fd)
		pn.fd = -1
	}
}

// find makes one pass over /proc and returns the family's live processes
// (the agent itself aside) and its zombies whose parent is this process.
// Every live one is recorded in known.
//
// unsure counts the orphans re-parented to this process (a subreaper) that
// could not be told: caught in the middle of an exec (see hasMarker), they
// show no marker yet. A detached `setsid nohup sh -c …` has left the group
// and its parent while it execs three times in a row; a pass that saw it
// so, and nothing else, once ended the reap and left it running. Other
// processes in an exec do not count: one whose parent is the family's is
// found by its ancestry, and one whose parent is not inherited no marker.
func (f *family) find() (alive, zombies []procInfo, unsure int) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, nil, 0
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	procs := make(map[int]procInfo, 64)
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 1 || pid == f.self {
			continue
		}
		info, ok := f.stat(pid)
		// A process older than the agent cannot descend from it, nor
		// carry its run's marker.
		if ok && info.start >= f.agentStart {
			procs[pid] = info
		}
	}
	// The agent's process group is the run's while its id is the
	// agent's: while the agent lives, or after it, as long as no other
	// process has taken its pid (a group's id is not given out again
	// while the group has members; a live process with the agent's pid
	// and another start time means the group was emptied and the id
	// reused).
	groupOK := f.agent > 0
	if leader, ok := procs[f.agent]; ok && leader.start != f.agentStart {
		groupOK = false
	}
	verdict := make(map[int]bool, len(procs))
	inExec := map[int]bool{}
	var ours func(pid int) bool
	ours = func(pid int) bool {
		if v, seen := verdict[pid]; seen {
			return v
		}
		info, ok := procs[pid]
		if !ok {
			return false
		}
		verdict[pid] = false // a pid reused mid-pass cannot loop
		start, known := f.known[pid]
		v := f.agent > 0 && pid == f.agent && info.start == f.agentStart ||
			groupOK && info.pgrp == f.agent ||
			known && start == info.start ||
			ours(info.ppid)
		if !v && !info.zombie {
			v, inExec[pid] = f.hasMarker(pid)
		}
		v = v || !info.zombie && (f.watch || info.ppid == f.self) && f.holdsPipe(pid)
		verdict[pid] = v
		return v
	}
	for pid, info := range procs {
		if !ours(pid) {
			if inExec[pid] && (f.watch || info.ppid == f.self) {
				unsure++
			}
			continue
		}
		if pid == f.agent && info.start == f.agentStart && !f.watch {
			continue
		}
		if info.zombie {
			if info.ppid == f.self {
				zombies = append(zombies, info)
			}
			continue
		}
		f.known[pid] = info.start
		alive = append(alive, info)
	}
	return alive, zombies, unsure
}

// hasMarker reports whether the environment of pid holds the run's marker,
// or, with inExec, that pid could not be told: it is in the middle of an
// exec, between its new memory map and its arguments and environment
// (which read empty until then). An empty environment is told from that
// by the arguments, which are never empty after an exec; the environment
// is read again once they are there.
func (f *family) hasMarker(pid int) (has, inExec bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	env, ok := f.read(dir + "/environ")
	if !ok || len(env) > 0 {
		return ok && bytes.Contains(env, f.marker), false
	}
	if args, ok := f.read(dir + "/cmdline"); ok && len(args) == 0 {
		return false, true
	}
	env, ok = f.read(dir + "/environ")
	return ok && bytes.Contains(env, f.marker), false
}

// holdsPipe reports whether pid, a child of this process, holds one of the
// agent's pipes: an orphan of the agent's that cleared its environment and
// left the group, but kept its standard output or error. A process running
// this program's executable is never taken for one: it may be a child this
// process is starting, between fork and exec, with every descriptor still
// open.
func (f *family) holdsPipe(pid int) bool {
	if len(f.pipes) == 0 {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid)
	if exe, err := os.Readlink(dir + "/exe"); err != nil || exe == f.selfExe {
		return false
	}
	d, err := os.Open(dir + "/fd")
	if err != nil {
		return false
	}
	fds, _ := d.Readdirnames(-1)
	d.Close()
	for _, fd := range fds {
		link, err := os.Readlink(dir + "/fd/" + fd)
		if err != nil {
			continue
		}
		for _, p := range f.pipes {
			if link == p {
				return true
			}
		}
	}
	return false
}

// stat reads /proc/PID/stat.
func (f *family) stat(pid int) (procInfo, bool) {
	data, ok := f.read("/proc/" + strconv.Itoa(pid) + "/stat")
	if !ok {
		return procInfo{}, false
	}
	// pid (comm) state ppid pgrp session … starttime (field 22); comm may
	// hold spaces and parentheses, so the fields are counted from the
	// last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procInfo{}, false
	}
	info := procInfo{pid: pid}
	field := 2
	for rest := data[i+1:]; len(rest) > 0 && field < 22; {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		v := rest[:end]
		rest = rest[end:]
		field++
		switch field {
		case 3:
			info.zombie = len(v) > 0 && (v[0] == 'Z' || v[0] == 'X')
		case 4:
			info.ppid, _ = strconv.Atoi(string(v))
		case 5:
			info.pgrp, _ = strconv.Atoi(string(v))
		case 22:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return procInfo{}, false
			}
			info.start = n
			return info, true
		}
	}
	return procInfo{}, false
}

// read reads a small /proc file into f.buf (valid until the next read).
func (f *family) read(path string) ([]byte, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	buf := f.buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if n > 0 {
			buf = buf[:len(buf)+n]
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			f.buf = buf[:0]
			return buf, err == nil
		}
	}
}
