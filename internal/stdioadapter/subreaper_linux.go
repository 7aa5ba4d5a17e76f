package stdioadapter

import "syscall"

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
