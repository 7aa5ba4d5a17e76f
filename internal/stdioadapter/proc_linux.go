package stdioadapter

import (
	"syscall"
	"unsafe"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// BecomeSubreaper makes orphaned descendants of this process its children
// instead of init's (Linux 3.4+), so the adapter can reap and kill the
// processes a stdio server leaves behind even when it is not PID 1.
func BecomeSubreaper() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// waitExited blocks until process pid has exited but leaves it unreaped, so
// its pid — and with it the id of its process group — cannot be reused until
// os/exec reaps it. (waitid with WNOWAIT; P_PID is 1.)
func waitExited(pid int) {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, 1, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wNoWait, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// wNoWait is WNOWAIT from <linux/wait.h>.
const wNoWait = 0x01000000
