package console

import (
	"testing"
	"time"
)

// Anyone may start sign-ins: when the console holds as many as it will,
// a new one forgets the oldest instead of being refused, and sign-ins that
// took too long are swept.
func TestPendingSignInsStayBoundedWithoutRefusing(t *testing.T) {
	c := &clock{}
	s := newSessions(time.Hour, time.Hour, c.now)
	first := s.startSignIn(pendingSignIn{nonce: "first"})
	second := s.startSignIn(pendingSignIn{nonce: "second"})
	var last string
	for i := 0; i < maxPendingSignIns-1; i++ {
		last = s.startSignIn(pendingSignIn{nonce: "flood"})
	}
	if n := len(s.pending); n != maxPendingSignIns || s.started.Len() != n {
		t.Fatalf("%d sign-ins held (%d in order), want %d", n, s.started.Len(), maxPendingSignIns)
	}
	if _, ok := s.finishSignIn(first); ok {
		t.Error("the oldest sign-in is still held beyond the bound")
	}
	if p, ok := s.finishSignIn(second); !ok || p.nonce != "second" {
		t.Errorf("the second oldest sign-in was forgotten too: %v %+v", ok, p)
	}
	if _, ok := s.finishSignIn(last); !ok {
		t.Error("the newest sign-in was not held")
	}
	if _, ok := s.finishSignIn(last); ok {
		t.Error("a sign-in finished twice")
	}
	c.advance(signInTimeout + time.Minute)
	fresh := s.startSignIn(pendingSignIn{nonce: "fresh"})
	if n := len(s.pending); n != 1 || s.started.Len() != 1 {
		t.Fatalf("%d sign-ins held after all but one took too long, want 1", n)
	}
	if p, ok := s.finishSignIn(fresh); !ok || p.nonce != "fresh" {
		t.Errorf("the fresh sign-in: %v %+v", ok, p)
	}
}

// One person signing in again and again ends their own oldest sessions,
// never another person's, and never takes every session.
func TestSessionsPerPersonEndOldestFirst(t *testing.T) {
	c := &clock{}
	s := newSessions(time.Hour, time.Hour, c.now)
	bobs, _ := s.create(Person{Username: bobUser})
	var alices []*session
	for i := 0; i < maxSessionsPerPerson+2; i++ {
		c.advance(time.Second)
		x, ok := s.create(Person{Username: aliceUser})
		if !ok {
			t.Fatalf("session %d of one person refused", i)
		}
		alices = append(alices, x)
	}
	if n := s.count(); n != maxSessionsPerPerson+1 {
		t.Fatalf("%d sessions, want %d of alice's and bob's one", n, maxSessionsPerPerson)
	}
	for i, x := range alices {
		if live := s.get(x.id, false) != nil; live != (i >= 2) {
			t.Errorf("alice's session %d live: %v", i, live)
		}
	}
	if s.get(bobs.id, false) == nil {
		t.Error("another person's session ended")
	}
}
