package servetest

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// ownGroup starts the browser in a process group of its own, which the
// kernel kills with SIGKILL if the test's thread that started it dies.
// (Debian's chromium-headless-shell is a shell script that runs the
// browser as its child: the parent-death signal reaches only the script,
// the group reaches both.)
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = new(syscall.SysProcAttr)
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// killGroup kills the process group led by pid.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }

func killPID(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

// processesUsing returns the live processes (zombies are dead) whose
// command line has --user-data-dir=dir: Chromium passes the flag to each
// of its children.
func processesUsing(dir string) []int {
	want := []byte("--user-data-dir=" + dir)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for arg := range bytes.SplitSeq(cmdline, []byte{0}) {
			if bytes.Equal(arg, want) && !zombie(pid) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// zombie reports whether pid has exited and waits for its parent to reap
// it (state Z in /proc/<pid>/stat).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}
