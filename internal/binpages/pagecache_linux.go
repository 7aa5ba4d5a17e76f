package binpages

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// DropFromPageCache writes a file out and drops its pages from the page
// cache, so the process maps its binary as one started from disk does. A
// file the linker has just written can stay cached in large folios, and
// a fault in a file mapping maps the pages of the folio it lands in
// together, where a binary read from disk gets the fault-around window
// (fault_around_bytes, 64 KB by default): each fault of a just-written
// binary maps up to 256 KB, the same code shows about 5 MB more
// file-backed RSS, and the number depends on how the build's write was
// cached.
func DropFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("while dropping %s from the page cache: %w", path, err)
	}
	return nil
}
