//go:build !linux

package binpages

import "errors"

// DropFromPageCache is Linux's posix_fadvise; elsewhere the binary stays
// cached as the linker wrote it.
func DropFromPageCache(string) error {
	return errors.New("dropping a file from the page cache is only done on Linux")
}
