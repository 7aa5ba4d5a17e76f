// Package binpages gives back the resident pages of the process's own
// binary once it has started. A Go process's start touches code and data
// it never runs again: the package inits of everything linked (client-go's
// scheme of every built-in group, cel-go, protobuf registries), the
// flag parsing of every subcommand, the first lists of its watches. Those
// pages stay mapped, and counted in its RSS, until the kernel runs short
// of memory. Release asks the kernel to reclaim them now (MADV_PAGEOUT);
// the pages the process goes on using fault back in from the page cache
// or the disk at their next use.
package binpages

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Release reclaims the resident pages of the executable's own read-only
// mappings (its code, read-only data and function tables). Writable
// mappings (package variables) are left alone: they hold state.
func Release() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("binpages: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return fmt.Errorf("binpages: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		from, to, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(from, 16, 64)
		end, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT); errno != 0 {
			return fmt.Errorf("binpages: madvise(MADV_PAGEOUT) on %s: %w", fields[0], errno)
		}
	}
	return sc.Err()
}
