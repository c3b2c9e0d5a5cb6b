package agentproc

import (
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// agentSysProcAttr starts the agent suspended, in a console process group
// of its own: newFamily puts it in a Job Object before it runs a single
// instruction, so that nothing it starts can escape the job. There is no
// sandbox on Windows (package sandbox says so before a session starts).
func agentSysProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_SUSPENDED}
}

// becomeSubreaper does nothing on Windows: the Job Object holds the tree.
func becomeSubreaper() {}

// family is, on Windows, the agent's Job Object: every process the agent
// starts is in it (a job's processes cannot break away unless the job
// allows it, and it does not), and the job is created with
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, so that when ralph's handle to it
// closes — ralph exits, or is killed by anything — Windows kills what is
// left in it: the kernel does there what Linux needs a parent-death signal,
// a subreaper and a watchdog for.
//
// job is 0 when the job could not be made (a Windows older than 8 inside
// a job of its own, which forbids nesting); the agent alone is then
// reached, through its process handle.
type family struct {
	pid  int
	proc windows.Handle
	job  windows.Handle
}

// newFamily makes the agent's job, puts the suspended agent in it, and
// lets it run. A failure leaves the agent running outside any job, rather
// than suspended for ever.
func newFamily(agent int, _ string, _ ...*os.File) *family {
	f := &family{pid: agent}
	f.proc, _ = windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(agent))
	if job, err := newKillOnCloseJob(); err == nil {
		if f.proc != 0 && windows.AssignProcessToJobObject(job, f.proc) == nil {
			f.job = job
		} else {
			windows.CloseHandle(job)
		}
	}
	resumeThreads(uint32(agent))
	return f
}

// newKillOnCloseJob creates an unnamed Job Object whose processes Windows
// kills when its last handle closes.
func newKillOnCloseJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, err
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return 0, err
	}
	return job, nil
}

// resumeThreads resumes the threads of process pid: the agent was created
// suspended, its main thread the only one.
func resumeThreads(pid uint32) {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	for err := windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		if th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID); err == nil {
			_, _ = windows.ResumeThread(th)
			windows.CloseHandle(th)
		}
	}
}

// snapshot has nothing to record: the job holds the tree.
func (f *family) snapshot() {}

// term asks the agent's console process group to end (CTRL_BREAK_EVENT,
// which Node.js, Python and Go programs end on by default). It reaches
// them only when they share ralph's console; kill, after the grace
// period, reaches them all.
func (f *family) term() {
	_ = windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(f.pid))
}

// kill ends every process of the job at once (the agent alone without a
// job).
func (f *family) kill() {
	switch {
	case f.job != 0:
		_ = windows.TerminateJobObject(f.job, 1)
	case f.proc != 0:
		_ = windows.TerminateProcess(f.proc, 1)
	}
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION.
type jobAccounting struct {
	TotalUserTime, TotalKernelTime                     int64
	ThisPeriodTotalUserTime, ThisPeriodTotalKernelTime int64
	TotalPageFaultCount, TotalProcesses                uint32
	ActiveProcesses, TotalTerminatedProcesses          uint32
}

// alive reports whether a process of the job is still running.
func (f *family) alive() bool {
	if f.job == 0 {
		return false
	}
	var info jobAccounting
	if err := windows.QueryInformationJobObject(f.job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil); err != nil {
		return false
	}
	return info.ActiveProcesses > 0
}

// reap stops what is left in the agent's job once the agent has exited —
// CTRL_BREAK (unless termed), then the job's termination at killAt — and
// waits (killWait at most) until the job is empty, then lets go of it.
func (f *family) reap(killAt time.Time, termed bool) {
	defer f.close()
	if !f.alive() {
		return
	}
	if !termed {
		f.term()
	}
	for time.Now().Before(killAt) {
		time.Sleep(10 * time.Millisecond)
		if !f.alive() {
			return
		}
	}
	f.kill()
	for deadline := time.Now().Add(killWait); f.alive() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// close lets go of the job (Windows kills what is still in it) and of
// the agent's process handle.
func (f *family) close() {
	if f.job != 0 {
		windows.CloseHandle(f.job)
		f.job = 0
	}
	if f.proc != 0 {
		windows.CloseHandle(f.proc)
		f.proc = 0
	}
}
