package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
)

func newManager(t *testing.T, key string, c *clocktesting.FakeClock) *Manager {
	t.Helper()
	s, err := signed.New([]byte(strings.Repeat(key, signed.MinKeyBytes)))
	if err != nil {
		t.Fatal(err)
	}
	return NewManager(s, Options{IdleTimeout: time.Minute, MaxAge: time.Hour, MaxConcurrent: 2, Now: c.Now})
}

func TestSessionsSurviveAReplicaAndStayBound(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	a, b := newManager(t, "k", c), newManager(t, "k", c)
	s, err := a.Open(Claims{Subject: "alice", Version: "2025-11-25", Elicitation: true})
	if err != nil {
		t.Fatal(err)
	}
	// Replica b never saw the session: it adopts it from the token alone.
	got, err := b.Resume(s.Token, "alice", "")
	if err != nil || got.Version != "2025-11-25" || !got.Elicitation || got.ID != s.ID {
		t.Fatalf("Resume on another replica = %+v, %v", got, err)
	}
	// Then it holds it: the token's next requests find the same session,
	// and the checks below run on a session held in memory as well.
	if again, err := b.Resume(s.Token, "alice", ""); err != nil || again != got {
		t.Fatalf("the next Resume on that replica = %p, %v; want the adopted session %p", again, err, got)
	}
	for name, tc := range map[string]struct {
		m                        *Manager
		token, subject, endpoint string
	}{
		"another identity":                     {b, s.Token, "mallory", ""},
		"another endpoint":                     {b, s.Token, "alice", "fs"},
		"another identity where it was opened": {a, s.Token, "mallory", ""},
		"another key":                          {newManager(t, "x", c), s.Token, "alice", ""},
		"tampered token":                       {b, tampered(s.Token), "alice", ""},
		"not a token at all":                   {b, "3f1c9a7e-5b2d-4e8a", "alice", ""},
	} {
		if _, err := tc.m.Resume(tc.token, tc.subject, tc.endpoint); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: Resume = %v, want ErrNotFound", name, err)
		}
	}
	// Ended on a: refused there.
	a.End(s)
	if _, err := a.Resume(s.Token, "alice", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an ended session must be refused, got %v", err)
	}
	// Past MaxAge: refused everywhere.
	c.Step(2 * time.Hour)
	if _, err := b.Resume(s.Token, "alice", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a session past MaxAge must be refused, got %v", err)
	}
}

func TestIdleExpiry(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	m := newManager(t, "k", c)
	idle, _ := m.Open(Claims{Subject: "alice", Version: "2025-11-25"})
	busy, _ := m.Open(Claims{Subject: "bob", Version: "2025-11-25"})
	untrack := busy.Track("7", func(error) {})
	c.Step(2 * time.Minute)
	m.Sweep()
	if _, err := m.Resume(idle.Token, "alice", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an idle session must expire, got %v", err)
	}
	if _, err := m.Resume(busy.Token, "bob", ""); err != nil {
		t.Fatalf("a session with a call in flight must not expire: %v", err)
	}
	untrack()
	if m.Len() != 1 {
		t.Fatalf("Len = %d, want 1", m.Len())
	}
}

func TestConcurrencyCancelAndAnswers(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	m := newManager(t, "k", c)
	s, _ := m.Open(Claims{Subject: "alice"})
	first, second, third := s.Acquire(), s.Acquire(), s.Acquire()
	if !first || !second || third {
		t.Fatal("MaxConcurrent 2 must allow exactly two slots")
	}
	s.Release()
	if !s.Acquire() {
		t.Fatal("a released slot must be reusable")
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	done := s.Track("42", cancel)
	if s.Cancel("41") {
		t.Fatal("cancelling an unknown request must report false")
	}
	if !s.Cancel("42") || ctx.Err() == nil {
		t.Fatal("Cancel must stop the tracked request")
	}
	if cause := context.Cause(ctx); cause != ErrCancelled {
		t.Fatalf("a cancelled request is told %v, want %v", cause, ErrCancelled)
	}
	done()

	answer, forget := s.Await(`"e-1"`)
	defer forget()
	if !s.Deliver(&jsonrpc.Message{ID: []byte(`"e-1"`), Result: []byte(`{}`)}) {
		t.Fatal("Deliver to a waiting request must succeed")
	}
	if (<-answer) == nil || s.Deliver(&jsonrpc.Message{ID: []byte(`"e-1"`)}) {
		t.Fatal("an answer is delivered once")
	}

	// Ending cancels what is in flight, telling it the session ended
	// (not that the agent cancelled it), and closes the grants.
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	s.Track("43", cancel2)
	s.Grants.AllowSession("mcp.fs.read")
	m.End(s)
	if ctx2.Err() == nil {
		t.Fatal("End must cancel calls in flight")
	}
	if cause := context.Cause(ctx2); cause != ErrEnded {
		t.Fatalf("a request in flight in an ended session is told %v, want %v", cause, ErrEnded)
	}
}

// TestEndReachesEveryRequest: a request tracked after its session ended (a
// DELETE between its arrival and its Track) is ended at once with the same
// cause, and two requests in flight with the same JSON-RPC id are both
// reached by the end and by notifications/cancelled.
func TestEndReachesEveryRequest(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	m := newManager(t, "k", c)
	s, _ := m.Open(Claims{Subject: "alice"})
	first, cancelFirst := context.WithCancelCause(context.Background())
	second, cancelSecond := context.WithCancelCause(context.Background())
	doneFirst := s.Track("7", cancelFirst)
	s.Track("7", cancelSecond)
	doneFirst() // the first answered: the second is still in flight
	if !s.Cancel("7") || context.Cause(second) != ErrCancelled {
		t.Fatalf("Cancel of a reused id: the request still in flight is told %v, want %v", context.Cause(second), ErrCancelled)
	}
	if first.Err() != nil {
		t.Fatal("a request that had answered was cancelled")
	}

	both := []context.Context{}
	for range 2 {
		ctx, cancel := context.WithCancelCause(context.Background())
		s.Track("8", cancel)
		both = append(both, ctx)
	}
	m.End(s)
	for i, ctx := range both {
		if context.Cause(ctx) != ErrEnded {
			t.Fatalf("request %d with a reused id, at the session's end: told %v, want %v", i, context.Cause(ctx), ErrEnded)
		}
	}
	late, cancelLate := context.WithCancelCause(context.Background())
	s.Track("9", cancelLate)()
	if context.Cause(late) != ErrEnded {
		t.Fatalf("a request tracked after its session ended is told %v, want %v", context.Cause(late), ErrEnded)
	}
}

// TestSessionsPerSubjectCapped: one identity cannot hold more than
// MaxPerSubject sessions on a replica; ending one, or
// its idling out, frees a place; other identities are not affected, and
// sessions adopted from another replica count too.
func TestSessionsPerSubjectCapped(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	sealer, _ := signed.New([]byte(strings.Repeat("k", signed.MinKeyBytes)))
	m := NewManager(sealer, Options{MaxPerSubject: 3, IdleTimeout: time.Minute, Now: c.Now})
	var open []*Session
	for range 3 {
		s, err := m.Open(Claims{Subject: "alice", Version: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, s)
	}
	if _, err := m.Open(Claims{Subject: "alice", Version: "2025-11-25"}); !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "3 sessions") {
		t.Fatalf("a fourth session: %v, want ErrTooMany naming the limit", err)
	}
	if _, err := m.Open(Claims{Subject: "bob", Version: "2025-11-25"}); err != nil {
		t.Fatalf("another identity: %v", err)
	}
	m.End(open[0])
	m.End(open[0]) // ending twice frees one place only
	if _, err := m.Open(Claims{Subject: "alice", Version: "2025-11-25"}); err != nil {
		t.Fatalf("after ending one: %v", err)
	}
	if _, err := m.Open(Claims{Subject: "alice", Version: "2025-11-25"}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("the place is taken again: %v", err)
	}
	c.Step(2 * time.Minute)
	m.Sweep()
	if _, err := m.Open(Claims{Subject: "alice", Version: "2025-11-25"}); err != nil {
		t.Fatalf("after the idle ones expired: %v", err)
	}

	// Adopting counts too: carol, at her cap of 2 on this replica, presents
	// sessions opened elsewhere; each adoption forgets her least recently
	// used idle one here, so she never holds more than 2.
	other := NewManager(sealer, Options{MaxPerSubject: 2, Now: c.Now})
	var elsewhere []*Session
	for range 4 {
		s, _ := m.Open(Claims{Subject: "carol", Version: "2025-11-25"})
		if s != nil {
			m.End(s) // keep m under its cap; the token stays valid on other
			elsewhere = append(elsewhere, s)
		}
	}
	if len(elsewhere) != 4 {
		t.Fatalf("opened %d sessions elsewhere, want 4", len(elsewhere))
	}
	for i, s := range elsewhere {
		c.Step(time.Second)
		if _, err := other.Resume(s.Token, "carol", ""); err != nil {
			t.Fatalf("adopting session %d: %v", i, err)
		}
		if n := other.Len(); n > 2 {
			t.Fatalf("after adopting %d sessions carol holds %d here, over the cap of 2", i+1, n)
		}
	}
	if _, err := other.Open(Claims{Subject: "carol", Version: "2025-11-25"}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("adopted sessions count: %v", err)
	}
	// A forgotten session is adopted again (no tombstone), with no grants.
	if _, err := other.Resume(elsewhere[0].Token, "carol", ""); err != nil || other.Len() != 2 {
		t.Fatalf("re-adopting a forgotten session: %v, %d live", err, other.Len())
	}
	// Busy sessions are not forgotten: with both in flight, one more is
	// refused.
	for _, s := range elsewhere[2:] {
		busy, err := other.Resume(s.Token, "carol", "")
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Track("1", func(error) {})()
	}
	if _, err := other.Resume(elsewhere[1].Token, "carol", ""); !errors.Is(err, ErrTooMany) {
		t.Fatalf("adopting over the cap with every session busy: %v, want ErrTooMany", err)
	}
}

// TestTombstonesBounded: a caller opening and ending sessions without end
// cannot grow the ended-session memory past maxTombstones.
func TestTombstonesBounded(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	m := newManager(t, "k", c)
	for range maxTombstones + 10 {
		s, err := m.Open(Claims{Subject: "alice", Version: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		m.End(s)
	}
	m.mu.Lock()
	n, order := len(m.ended), len(m.endedOrder)
	m.mu.Unlock()
	if n != maxTombstones || order != maxTombstones {
		t.Fatalf("%d tombstones (%d in order), want at most %d", n, order, maxTombstones)
	}
	c.Step(2 * time.Hour)
	m.Sweep()
	m.mu.Lock()
	n, order = len(m.ended), len(m.endedOrder)
	m.mu.Unlock()
	if n != 0 || order != 0 {
		t.Fatalf("after MaxAge: %d tombstones, %d in order, want none", n, order)
	}
}

// TestEndToken: a DELETE ends a session live here, with the cause it is
// given; one not live here (opened on another replica) is not adopted,
// so at the identity's cap no other session of its is forgotten; and a
// DELETE refused (another identity or endpoint, ended already, too old)
// changes nothing.
func TestEndToken(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	sealer, _ := signed.New([]byte(strings.Repeat("k", signed.MinKeyBytes)))
	here := NewManager(sealer, Options{MaxPerSubject: 2, MaxAge: time.Hour, Now: c.Now})
	elsewhere := NewManager(sealer, Options{MaxAge: time.Hour, Now: c.Now})

	// Live here, with a request in flight: it ends, told why.
	live := mustOpen(t, here, "alice")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer live.Track("1", cancel)()
	if id, err := here.EndToken(live.Token, "alice", "", ErrEndedByID); err != nil || id != live.ID {
		t.Fatalf("EndToken of a live session = %q, %v; want its id %q", id, err, live.ID)
	}
	if context.Cause(ctx) != ErrEndedByID {
		t.Fatalf("its request in flight is told %v, want %v", context.Cause(ctx), ErrEndedByID)
	}
	if _, err := here.Resume(live.Token, "alice", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resume after EndToken = %v, want ErrNotFound", err)
	}

	// alice at her cap here, both sessions idle: ending one of hers opened
	// elsewhere forgets neither.
	var mine []*Session
	for range 2 {
		mine = append(mine, mustOpen(t, here, "alice"))
		c.Step(time.Second)
	}
	far := mustOpen(t, elsewhere, "alice")
	if id, err := here.EndToken(far.Token, "alice", "", ErrEnded); err != nil || id != far.ID {
		t.Fatalf("EndToken of a session opened elsewhere = %q, %v; want its id %q", id, err, far.ID)
	}
	for i, s := range mine {
		if got, err := here.Resume(s.Token, "alice", ""); err != nil || got != s {
			t.Fatalf("alice's session %d here after the DELETE of one opened elsewhere: %p, %v; want it live, %p", i, got, err, s)
		}
	}
	if n := here.Len(); n != 2 {
		t.Fatalf("%d sessions live here, want alice's 2", n)
	}
	// Its tombstone is written: presented here again, it is refused.
	if _, err := here.Resume(far.Token, "alice", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resume here of the session ended here = %v, want ErrNotFound", err)
	}

	// Refused: nothing changes. Ended already (here, and the one from
	// elsewhere), another identity or endpoint, then too old.
	for name, tc := range map[string]struct{ token, subject, endpoint string }{
		"ended here":                  {live.Token, "alice", ""},
		"ended here, from elsewhere":  {far.Token, "alice", ""},
		"another identity":            {mine[0].Token, "mallory", ""},
		"another endpoint":            {mine[0].Token, "alice", "fs"},
		"a tampered token":            {tampered(mine[0].Token), "alice", ""},
		"another identity, elsewhere": {mustOpen(t, elsewhere, "alice").Token, "mallory", ""},
	} {
		if _, err := here.EndToken(tc.token, tc.subject, tc.endpoint, ErrEnded); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: EndToken = %v, want ErrNotFound", name, err)
		}
	}
	stale := mustOpen(t, elsewhere, "alice")
	c.Step(time.Hour + time.Minute)
	for name, token := range map[string]string{"live here": mine[0].Token, "opened elsewhere": stale.Token} {
		if _, err := here.EndToken(token, "alice", "", ErrEnded); !errors.Is(err, ErrNotFound) {
			t.Errorf("too old, %s: EndToken = %v, want ErrNotFound", name, err)
		}
	}
	if n := here.Len(); n != 2 {
		t.Fatalf("after the refused DELETEs %d sessions live here, want 2", n)
	}
	here.mu.Lock()
	tombstones := len(here.ended)
	here.mu.Unlock()
	if tombstones != 2 {
		t.Fatalf("%d tombstones here, want the 2 sessions ended", tombstones)
	}
}

func mustOpen(t *testing.T, m *Manager, subject string) *Session {
	t.Helper()
	s, err := m.Open(Claims{Subject: subject, Version: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tampered is token with one character in its middle changed to another:
// never the token itself (replacing its last two characters with "AA" was
// the same token when it already ended so, about once in 1,024 runs).
func tampered(token string) string {
	b := []byte(token)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}
