//go:build !linux

package stdioadapter

// BecomeSubreaper does nothing outside Linux; orphans go to init there.
func BecomeSubreaper() error { return nil }
