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
	r.dirty = true // activity before the first tick
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

func TestEveryReleasesAfterActivityAndStopsWithItsContext(t *testing.T) {
	released := make(chan struct{}, 1)
	r := &Releaser{Release: func() { released <- struct{}{} }}
	h := r.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	done := make(chan struct{})
	go func() { r.Every(ctx, ticks); close(done) }()
	ticks <- time.Now() // quiet since the start (Now released its garbage)
	ticks <- time.Now()
	select {
	case <-released:
		t.Fatal("released with no activity since the start")
	default:
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/mcp", nil))
	ticks <- time.Now() // the call
	ticks <- time.Now() // a quiet period after it
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("no release after a quiet period that followed a call")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return when its context ended")
	}
}

// TestAStreamIsIdle: a POST that only streams updates (Streaming) does not
// keep the bridge busy; once it counts again (busyAgain), it does.
func TestAStreamIsIdle(t *testing.T) {
	released := 0
	r := &Releaser{Release: func() { released++ }}
	entered, leave := make(chan struct{}), make(chan struct{})
	h := r.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		busyAgain := r.Streaming()
		entered <- struct{}{}
		<-leave
		busyAgain()
		entered <- struct{}{}
		<-leave
	}))
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil))
		close(done)
	}()
	<-entered
	r.tick() // the POST was activity
	r.tick() // quiet: it only streams
	if released != 1 {
		t.Fatalf("released %d times while a POST only streamed, want 1", released)
	}
	leave <- struct{}{}
	<-entered
	r.tick()
	r.tick()
	if released != 1 {
		t.Fatalf("released %d times with the POST busy again, want 1", released)
	}
	leave <- struct{}{}
	<-done
	if (*Releaser)(nil).Streaming()(); r.posts.Load() != 0 {
		t.Fatalf("%d POSTs in flight after the request returned, want 0", r.posts.Load())
	}
}

// TestACallInFlightKeepsTheBridgeBusy: a POST that outlasts quiet periods
// (a long tool call, a call parked for approval) is activity; an open GET
// (an agent's listen stream) is not.
func TestACallInFlightKeepsTheBridgeBusy(t *testing.T) {
	released := 0
	r := &Releaser{Release: func() { released++ }}
	entered, leave := make(chan struct{}), make(chan struct{})
	h := r.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-leave
	}))
	serve := func(method string) chan struct{} {
		done := make(chan struct{})
		go func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, "/mcp", nil)); close(done) }()
		<-entered
		return done
	}
	post := serve(http.MethodPost)
	for i := range 3 {
		r.tick()
		if released != 0 {
			t.Fatalf("tick %d with a POST in flight: released", i)
		}
	}
	leave <- struct{}{}
	<-post
	get := serve(http.MethodGet)
	r.tick() // the GET was activity
	r.tick() // quiet, the GET still open: released
	if released != 1 {
		t.Fatalf("released %d times with only a GET open after the POST ended, want 1", released)
	}
	leave <- struct{}{}
	<-get
}

// TestNowReleasesAtOnce: the bridge releases its start's garbage when it is
// ready, whatever the ticks say.
func TestNowReleasesAtOnce(t *testing.T) {
	released := 0
	r := &Releaser{Release: func() { released++ }}
	r.Now()
	if released != 1 {
		t.Fatalf("Now released %d times, want 1", released)
	}
}
