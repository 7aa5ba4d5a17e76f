//go:build !linux

package main

import "errors"

// dropFromPageCache is Linux's posix_fadvise; elsewhere the binary stays
// cached as the linker wrote it.
func dropFromPageCache(string) error {
	return errors.New("dropping a file from the page cache is only done on Linux")
}
