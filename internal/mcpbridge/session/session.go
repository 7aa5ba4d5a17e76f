// Package session holds the bridge's legacy-era (2025-11-25 and older) MCP
// sessions. A session id is a sealed token (package signed) carrying who
// opened it, on which endpoint, the protocol version and whether the client
// can answer elicitations: any replica that holds the shared key can verify
// it and carry the session on, so a session survives the loss of the replica
// that opened it. What a replica keeps in memory is only what is local by
// nature — the approvals given in the session, the calls in flight, the
// questions waiting for an answer, the last time it was used — and is
// rebuilt empty when another replica adopts the session (a lost "allow for
// this session" is asked again: the safe direction).
//
// Idle expiry is recorded by the replica that sees it (the agent may have
// moved on to another); every replica refuses a session older than MaxAge.
// Ending a session (DELETE) is recorded there too, and, with Options.Ends,
// for every replica: without it, a session ended on one replica can still
// be used on another until MaxAge (docs/bridge.md).
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/every"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/inflight"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// purpose separates session tokens from other sealed values.
const purpose = "mcp-session"

// Defaults of Options.
const (
	DefaultIdleTimeout   = 30 * time.Minute
	DefaultMaxAge        = 24 * time.Hour
	DefaultMaxConcurrent = 32
	// DefaultMaxPerSubject bounds the sessions one identity holds open on a
	// replica: each costs memory until it ends or idles out, and a client
	// that never ends its sessions must not exhaust a replica.
	DefaultMaxPerSubject = 100
	// maxTombstones bounds the ended sessions a replica remembers. Past it
	// the oldest is forgotten, which lets that session's own identity
	// resume it here until MaxAge: what any other replica allows anyway.
	maxTombstones = 1 << 16
)

// ErrNotFound means the session id is unknown here: not sealed with our key,
// opened by another identity or on another endpoint, ended, idle too long or
// too old. The transport answers 404, which tells a client to start over.
var ErrNotFound = errors.New("session not found")

// ErrTooMany is returned by Open when the identity has MaxPerSubject
// sessions live on this replica.
var ErrTooMany = errors.New("too many sessions")

// Why a request in flight in a session was ended, as it is told
// (context.Cause through the func given to Track) and records it.
var (
	// ErrCancelled: the agent cancelled the request (Cancel).
	ErrCancelled = errors.New("the agent cancelled the request (notifications/cancelled)")
	// ErrEnded: the agent ended its session (End, or EndToken after an
	// authenticated DELETE).
	ErrEnded = errors.New("the agent ended its session (DELETE)")
	// ErrEndedByID: a DELETE that carried no credentials ended the session
	// (EndToken): whoever sent it knew the session id, which need not be
	// the agent (a stolen id). Said apart from ErrEnded so that audit and
	// the calls it cancels tell the two apart.
	ErrEndedByID = errors.New("a DELETE without credentials, by its session id, ended the session")
	// ErrIdle: the session idled out (Sweep). Sweep ends only sessions
	// with nothing in flight, but a request may start between its check
	// and the end.
	ErrIdle = errors.New("the session was not used for longer than its idle timeout")
	// ErrForgotten: the session was forgotten here to adopt another of its
	// identity's over MaxPerSubject (Resume), as ErrIdle may be.
	ErrForgotten = errors.New("the session was forgotten on this replica for another of its identity's (too many sessions)")
)

// Claims are what a session id carries.
type Claims struct {
	// ID is random, so two sessions of one caller differ.
	ID string `json:"id"`
	// Subject is the user name of the identity that opened the session.
	Subject string `json:"sub"`
	// Endpoint is "" for /mcp, the server name for /servers/<name>/mcp.
	Endpoint string `json:"ep,omitempty"`
	// Version is the negotiated protocol version.
	Version string `json:"v"`
	// Elicitation says the client declared it can answer elicitation/create
	// (form mode).
	Elicitation bool `json:"el,omitempty"`
	// ElicitationURL says it can answer elicitation/create in URL mode.
	ElicitationURL bool `json:"eu,omitempty"`
	// Sampling says it can answer sampling/createMessage.
	Sampling bool `json:"sa,omitempty"`
	// IssuedAt is when the session was opened, in Unix seconds.
	IssuedAt int64 `json:"iat"`
}

// Options tune a Manager.
type Options struct {
	// IdleTimeout ends a session not used for this long.
	IdleTimeout time.Duration
	// MaxAge is the longest any replica accepts a session id.
	MaxAge time.Duration
	// MaxConcurrent bounds the requests of one session in flight at once.
	MaxConcurrent int
	// MaxPerSubject bounds the sessions one identity holds on this replica.
	// Open refuses one more; adopting one more from another replica
	// forgets the identity's least recently used idle session here
	// instead (see Resume), so moving between replicas still works.
	MaxPerSubject int
	// Now reads the clock (time.Now when nil).
	Now func() time.Time
	// NewID makes session ids (random when nil; tests fix them).
	NewID func() string
	// Ends, when set, shares the sessions' ends (DELETE) between the
	// replicas: a session ended on one is refused on every other. Without
	// it, an ended session works on another replica until MaxAge.
	Ends Ends
}

// Ends records sessions ended by DELETE for every replica.
type Ends interface {
	// End records that session id ended; until is when it would be too
	// old for any replica anyway. Called without the Manager's lock.
	End(id string, until time.Time)
	// Ended says whether any replica recorded session id's end. Called on
	// every request of a session: it must not wait on the network.
	Ended(id string) bool
	// Key is the name session id's end is recorded by (what EndRecorded
	// is told).
	Key(id string) string
}

// Manager issues, verifies and expires sessions. It is safe for concurrent use.
type Manager struct {
	sealer *signed.Sealer
	opts   Options

	mu   sync.Mutex
	live map[string]*Session
	// byToken are the live sessions by the token they were opened or
	// adopted with: a session's next requests are found without opening
	// the token again (a MAC, a decryption and a decode each).
	byToken map[string]*Session
	ended   map[string]time.Time // session id → when the tombstone may go
	// endedOrder holds the ids of ended in the order they ended, to forget
	// the oldest when there are maxTombstones.
	endedOrder []string
	// bySubject counts the live sessions of each identity.
	bySubject map[string]int
	// byEndKey are the live sessions by the name their end is recorded
	// by (Options.Ends), for EndRecorded.
	byEndKey map[string]*Session
}

// NewManager returns a Manager that seals with sealer.
func NewManager(sealer *signed.Sealer, opts Options) *Manager {
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.MaxPerSubject <= 0 {
		opts.MaxPerSubject = DefaultMaxPerSubject
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Manager{sealer: sealer, opts: opts, live: map[string]*Session{}, byToken: map[string]*Session{}, byEndKey: map[string]*Session{}, ended: map[string]time.Time{}, bySubject: map[string]int{}}
}

// Session is one session as this replica knows it.
type Session struct {
	Claims
	// Token is the session id the client sends (Mcp-Session-Id).
	Token string
	// Grants are the approvals given in this session.
	Grants *policy.SessionGrants

	// requests bounds its requests in flight (Options.MaxConcurrent).
	requests *inflight.Limit
	// endKey is its key in Manager.byEndKey.
	endKey string

	mu       sync.Mutex
	logLevel string
	lastSeen time.Time
	// inflight are the requests in flight, by a key of their own: an
	// agent may reuse a JSON-RPC id while the first request is still
	// running, and the session's end must reach both.
	inflight     map[uint64]tracked
	lastInflight uint64
	waiting      map[string]chan *jsonrpc.Message
	ended        bool
	endCause     error // why it ended, for a request tracked after
	// atEnd are the clean-ups to run when the session ends, by the key
	// AtEnd gave each (lastAtEnd is the last key given).
	atEnd     map[uint64]func()
	lastAtEnd uint64
}

// Open starts a session for c (ID and IssuedAt are filled in).
func (m *Manager) Open(c Claims) (*Session, error) {
	if m.opts.NewID != nil {
		c.ID = m.opts.NewID()
	} else {
		var id [16]byte
		_, _ = rand.Read(id[:])
		c.ID = hex.EncodeToString(id[:])
	}
	now := m.opts.Now()
	c.IssuedAt = now.Unix()
	token, err := m.sealer.Seal(purpose, c)
	if err != nil {
		return nil, err
	}
	s := m.newSession(c, token, now)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bySubject[c.Subject] >= m.opts.MaxPerSubject {
		return nil, fmt.Errorf("%w: %s has %d sessions open on this replica, the limit; end one (DELETE) or let one idle out (%s)",
			ErrTooMany, c.Subject, m.opts.MaxPerSubject, m.opts.IdleTimeout)
	}
	m.addLiveLocked(s)
	return s, nil
}

func (m *Manager) newSession(c Claims, token string, now time.Time) *Session {
	return &Session{Claims: c, Token: token, Grants: policy.NewSessionGrants(), requests: inflight.New(int64(m.opts.MaxConcurrent), 0), lastSeen: now}
}

// Resume finds the session of token for subject on endpoint, adopting it
// when another replica opened it. Any mismatch is ErrNotFound, so a caller
// cannot tell a foreign session from a missing one.
func (m *Manager) Resume(token, subject, endpoint string) (*Session, error) {
	if s, ok := m.resumeLive(token, subject, endpoint); ok {
		if s == nil {
			return nil, ErrNotFound
		}
		return s, nil
	}
	var c Claims
	if err := m.sealer.Open(purpose, token, &c); err != nil {
		return nil, ErrNotFound
	}
	now := m.opts.Now()
	if !m.fits(c, subject, endpoint, now) {
		return nil, ErrNotFound
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, gone := m.ended[c.ID]; gone || m.endedElsewhereLocked(c) {
		return nil, ErrNotFound
	}
	s := m.live[c.ID]
	if s == nil {
		// Adopting counts against the cap like opening: a caller must not
		// hold more sessions here by presenting ones opened elsewhere.
		if m.bySubject[c.Subject] >= m.opts.MaxPerSubject && !m.forgetLeastRecentLocked(c.Subject) {
			return nil, fmt.Errorf("%w: %s has %d sessions busy on this replica", ErrTooMany, c.Subject, m.opts.MaxPerSubject)
		}
		s = m.newSession(c, token, now)
		m.addLiveLocked(s)
	}
	s.mu.Lock()
	s.lastSeen = now
	s.mu.Unlock()
	return s, nil
}

// fits says whether a session of claims c may be used (or ended) by
// subject on endpoint at now: the same identity and endpoint it was
// opened for, an ID, and not older than MaxAge (every replica's rule).
func (m *Manager) fits(c Claims, subject, endpoint string, now time.Time) bool {
	return c.Subject == subject && c.Endpoint == endpoint && c.ID != "" &&
		now.Sub(time.Unix(c.IssuedAt, 0)) <= m.opts.MaxAge
}

// resumeLive is Resume for a token this replica opened or adopted and
// still holds: its claims are the session's, checked as Resume checks
// them. ok is false when the token is not known here (Resume opens it);
// a nil session with ok means refused.
func (m *Manager) resumeLive(token, subject, endpoint string) (s *Session, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s = m.byToken[token]
	if s == nil {
		return nil, false
	}
	now := m.opts.Now()
	if !m.fits(s.Claims, subject, endpoint, now) {
		return nil, true
	}
	if m.endedElsewhereLocked(s.Claims) {
		return nil, true
	}
	s.mu.Lock()
	s.lastSeen = now
	s.mu.Unlock()
	return s, true
}

// Subject is the user name sealed in a session id: who opened it. It says
// nothing of whether the session is still live (Resume checks that).
func (m *Manager) Subject(token string) (string, error) {
	var c Claims
	if err := m.sealer.Open(purpose, token, &c); err != nil || c.ID == "" {
		return "", ErrNotFound
	}
	return c.Subject, nil
}

// End ends a session on this replica (DELETE): its requests in flight end
// with cause ErrEnded.
func (m *Manager) End(s *Session) {
	m.mu.Lock()
	m.endLocked(s, ErrEnded)
	m.mu.Unlock()
	m.shareEnd(s.Claims)
}

// shareEnd tells the other replicas (Options.Ends) that the session of c
// ended.
func (m *Manager) shareEnd(c Claims) {
	if m.opts.Ends != nil {
		m.opts.Ends.End(c.ID, time.Unix(c.IssuedAt, 0).Add(m.opts.MaxAge))
	}
}

// addLiveLocked makes s live here. m.mu is held.
func (m *Manager) addLiveLocked(s *Session) {
	m.live[s.ID], m.byToken[s.Token] = s, s
	m.bySubject[s.Subject]++
	if m.opts.Ends != nil {
		s.endKey = m.opts.Ends.Key(s.ID)
		m.byEndKey[s.endKey] = s
	}
}

// EndRecorded ends here, at once, the live session whose end a replica
// recorded under key (Ends.Key): its requests in flight are told
// ErrEnded and its upstream sessions end, without waiting for a request
// naming it (which may never come here).
func (m *Manager) EndRecorded(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.byEndKey[key]; s != nil {
		m.endLocked(s, ErrEnded)
	}
}

// endedElsewhereLocked says whether another replica ended the session of
// c (Options.Ends); if so it ends here too, its requests in flight told
// ErrEnded. m.mu is held.
func (m *Manager) endedElsewhereLocked(c Claims) bool {
	if m.opts.Ends == nil || !m.opts.Ends.Ended(c.ID) {
		return false
	}
	if s := m.live[c.ID]; s != nil {
		m.endLocked(s, ErrEnded)
	} else {
		m.tombstoneLocked(c)
	}
	return true
}

// EndToken ends the session of token for subject on endpoint (DELETE),
// its requests in flight with cause why, and returns the session's ID
// (what audit names it by). A session live here ends as End ends it. One
// not live here (another replica's, or opened before this replica
// started) is not adopted: its claims are checked as Resume checks them
// and only its tombstone is written. Adopting would count it against
// MaxPerSubject and, at the cap, forget another of subject's sessions
// here (its grants, upstream sessions and subscriptions) just to end one
// that holds nothing on this replica. Any mismatch, or a session ended
// already, is ErrNotFound and changes nothing.
func (m *Manager) EndToken(token, subject, endpoint string, why error) (string, error) {
	m.mu.Lock()
	s := m.byToken[token]
	m.mu.Unlock()
	var c Claims
	if s != nil {
		c = s.Claims
	} else if err := m.sealer.Open(purpose, token, &c); err != nil {
		return "", ErrNotFound
	}
	if !m.fits(c, subject, endpoint, m.opts.Now()) {
		return "", ErrNotFound
	}
	m.mu.Lock()
	if _, gone := m.ended[c.ID]; gone || m.endedElsewhereLocked(c) {
		m.mu.Unlock()
		return "", ErrNotFound
	}
	if s := m.live[c.ID]; s != nil {
		m.endLocked(s, why)
	} else {
		m.tombstoneLocked(c)
	}
	m.mu.Unlock()
	m.shareEnd(c)
	return c.ID, nil
}

// endLocked ends s, its requests in flight with cause why.
func (m *Manager) endLocked(s *Session, why error) {
	m.tombstoneLocked(s.Claims)
	m.dropLocked(s, why)
}

// tombstoneLocked remembers that the session of c ended, until it is too
// old for any replica to accept.
func (m *Manager) tombstoneLocked(c Claims) {
	if _, gone := m.ended[c.ID]; gone {
		return
	}
	m.ended[c.ID] = time.Unix(c.IssuedAt, 0).Add(m.opts.MaxAge)
	m.endedOrder = append(m.endedOrder, c.ID)
	for len(m.ended) > maxTombstones {
		delete(m.ended, m.endedOrder[0])
		m.endedOrder = m.endedOrder[1:]
	}
}

// forgetLeastRecentLocked drops subject's least recently used session that
// has no call in flight from this replica's memory, without a tombstone:
// presented again, it is adopted again with no grants (the safe direction).
// It returns false when every one of them is busy.
func (m *Manager) forgetLeastRecentLocked(subject string) bool {
	var lru *Session
	var lruSeen time.Time
	for _, s := range m.live {
		if s.Subject != subject {
			continue
		}
		s.mu.Lock()
		seen, busy := s.lastSeen, len(s.inflight) > 0
		s.mu.Unlock()
		if !busy && (lru == nil || seen.Before(lruSeen)) {
			lru, lruSeen = s, seen
		}
	}
	if lru == nil {
		return false
	}
	m.dropLocked(lru, ErrForgotten)
	return true
}

// dropLocked takes s out of memory: its grants, calls in flight (with
// cause why) and clean-ups end with it.
func (m *Manager) dropLocked(s *Session, why error) {
	if _, live := m.live[s.ID]; live {
		if m.bySubject[s.Subject]--; m.bySubject[s.Subject] <= 0 {
			delete(m.bySubject, s.Subject)
		}
	}
	delete(m.live, s.ID)
	if m.byEndKey[s.endKey] == s {
		delete(m.byEndKey, s.endKey)
	}
	if m.byToken[s.Token] == s {
		delete(m.byToken, s.Token)
	}
	s.Grants.Close()
	s.mu.Lock()
	for _, t := range s.inflight {
		t.cancel(why)
	}
	atEnd := s.atEnd
	s.ended, s.endCause, s.atEnd = true, why, nil
	s.mu.Unlock()
	for _, f := range atEnd {
		// Clean-ups may talk to servers (unsubscribe): never under m.mu.
		go f()
	}
}

// AtEnd registers f to run when the session ends on this replica (DELETE,
// idle expiry), and returns what forgets f (for a clean-up that is done
// before the session ends: f must not keep what it names reachable for the
// session's life). It returns false, and does not keep f, when the session
// has ended already.
func (s *Session) AtEnd(f func()) (forget func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return func() {}, false
	}
	if s.atEnd == nil {
		s.atEnd = map[uint64]func(){}
	}
	s.lastAtEnd++
	key := s.lastAtEnd
	s.atEnd[key] = f
	return func() {
		s.mu.Lock()
		delete(s.atEnd, key)
		s.mu.Unlock()
	}, true
}

// Sweep ends sessions idle longer than IdleTimeout (and not busy) and forgets
// tombstones of sessions past MaxAge. The bridge calls it periodically.
func (m *Manager) Sweep() {
	now := m.opts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.live {
		s.mu.Lock()
		idle := now.Sub(s.lastSeen) > m.opts.IdleTimeout && len(s.inflight) == 0
		s.mu.Unlock()
		if idle {
			m.endLocked(s, ErrIdle)
		}
	}
	for id, forget := range m.ended {
		if now.After(forget) {
			delete(m.ended, id)
		}
	}
	order := m.endedOrder[:0:0]
	for _, id := range m.endedOrder {
		if _, kept := m.ended[id]; kept {
			order = append(order, id)
		}
	}
	m.endedOrder = order
}

// Run sweeps every interval until ctx ends.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	every.Run(ctx, interval, m.Sweep)
}

// Len is the number of live sessions on this replica.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// Acquire takes one of the session's concurrency slots; false when all are
// taken.
func (s *Session) Acquire() bool { return s.requests.Take("", 1) }

// Release returns a slot taken by Acquire.
func (s *Session) Release() { s.requests.Give("", 1) }

// Track records a request in flight so that notifications/cancelled
// (Cancel) or the session's end can stop it: cancel is called with why
// (ErrCancelled, ErrEnded, ErrEndedByID, ErrIdle, ErrForgotten). The
// returned func forgets it.
// A request tracked once the session has ended (a DELETE between the
// request's arrival and its Track) is cancelled at once, with the end's
// cause.
func (s *Session) Track(requestID string, cancel context.CancelCauseFunc) func() {
	s.mu.Lock()
	if s.ended {
		why := s.endCause
		s.mu.Unlock()
		cancel(why)
		return func() {}
	}
	if s.inflight == nil {
		s.inflight = map[uint64]tracked{}
	}
	s.lastInflight++
	key := s.lastInflight
	s.inflight[key] = tracked{id: requestID, cancel: cancel}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.inflight, key)
		s.lastSeen = time.Now()
		s.mu.Unlock()
	}
}

// tracked is a request in flight: its JSON-RPC id and what ends it.
type tracked struct {
	id     string
	cancel context.CancelCauseFunc
}

// Cancel stops the requests in flight with this id, if any, with cause
// ErrCancelled.
func (s *Session) Cancel(requestID string) bool {
	var cancels []context.CancelCauseFunc
	s.mu.Lock()
	for _, t := range s.inflight {
		if t.id == requestID {
			cancels = append(cancels, t.cancel)
		}
	}
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel(ErrCancelled)
	}
	return len(cancels) > 0
}

// Await registers a request the bridge sends to the client (elicitation)
// and returns where its answer arrives; done forgets it.
func (s *Session) Await(id string) (answer <-chan *jsonrpc.Message, done func()) {
	ch := make(chan *jsonrpc.Message, 1)
	s.mu.Lock()
	if s.waiting == nil {
		s.waiting = map[string]chan *jsonrpc.Message{}
	}
	s.waiting[id] = ch
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
	}
}

// Deliver hands the client's answer to the request waiting for it; false
// when none is (answered already, timed out, or asked by another replica).
func (s *Session) Deliver(m *jsonrpc.Message) bool {
	s.mu.Lock()
	ch := s.waiting[string(m.ID)]
	delete(s.waiting, string(m.ID))
	s.mu.Unlock()
	if ch != nil {
		ch <- m
	}
	return ch != nil
}

// SetLogLevel records the level of log messages the client asked for
// (logging/setLevel); "" means none were asked for.
func (s *Session) SetLogLevel(level string) {
	s.mu.Lock()
	s.logLevel = level
	s.mu.Unlock()
}

// LogLevel is the level the client asked for, "" when it did not.
func (s *Session) LogLevel() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logLevel
}
