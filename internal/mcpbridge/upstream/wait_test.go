package upstream

import (
	"testing"
	"time"
)

// within waits for ch up to 20 s, failing the test with what it waited
// for: a regression fails with a message rather than hanging until go
// test's timeout.
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: not within 20s", what)
		panic("unreachable")
	}
}
