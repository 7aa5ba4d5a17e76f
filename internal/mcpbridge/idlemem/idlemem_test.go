package idlemem

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestReleasesOnceAfterEachQuietPeriodThatFollowsActivity(t *testing.T) {
	released := 0
	r := &Releaser{Release: func() { released++ }}
	h := r.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	call := func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/mcp", nil)) }
	r.dirty = true // as Every starts: the start's garbage
	for i, step := range []struct {
		calls int
		want  int
	}{
		{0, 1}, // quiet since the start: released
		{0, 1}, // still quiet, nothing new to release
		{3, 1}, // busy: not now
		{1, 1}, // still busy
		{0, 2}, // quiet after activity: released
		{0, 2},
	} {
		for range step.calls {
			call()
		}
		r.tick()
		if released != step.want {
			t.Fatalf("tick %d: released %d times, want %d", i, released, step.want)
		}
	}
}

func TestEveryStartsDirtyAndStopsWithItsContext(t *testing.T) {
	released := make(chan struct{}, 1)
	r := &Releaser{Release: func() { released <- struct{}{} }}
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	done := make(chan struct{})
	go func() { r.Every(ctx, ticks); close(done) }()
	ticks <- time.Now()
	<-released // the first quiet period after the start releases
	cancel()
	<-done
}
