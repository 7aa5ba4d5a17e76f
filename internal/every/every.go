// Package every runs a periodic chore, such as a sweep of expired entries,
// until its context ends.
package every

import (
	"context"
	"time"
)

// Run calls f every interval until ctx ends (not at once: the first call
// is an interval after Run starts).
func Run(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
