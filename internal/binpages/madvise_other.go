//go:build !linux

package binpages

import "errors"

// Release reads /proc/self/smaps first, so this is not reached off Linux.
func dontNeed(uint64, uint64) error {
	return errors.New("not supported on this system")
}
