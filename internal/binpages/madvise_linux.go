package binpages

import "golang.org/x/sys/unix"

func dontNeed(start, length uint64) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(length), unix.MADV_DONTNEED); errno != 0 {
		return errno
	}
	return nil
}
