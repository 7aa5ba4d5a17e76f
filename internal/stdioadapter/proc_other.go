//go:build !linux

package stdioadapter

// BecomeSubreaper does nothing outside Linux; orphans go to init there.
func BecomeSubreaper() error { return nil }

// waitExited returns at once outside Linux: the group is killed after the
// server is reaped there.
func waitExited(int) {}
