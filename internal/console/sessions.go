package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Cookie names. The session cookie is SameSite=Strict: a page of another
// site can neither read it nor make the browser send it with a form post.
// The sign-in cookie binds a sign-in to the browser that started it; it
// must be Lax, as the identity provider's redirect back is a cross-site
// navigation, and it lives for the sign-in only.
const (
	sessionCookie = "mcp_console_session"
	signInCookie  = "mcp_console_signin"
)

// Person is who is signed in: the user name and groups the API server sees
// when the console impersonates them, mapped from the identity provider's
// claims exactly as the bridge maps a token's.
type Person struct {
	Username string
	Groups   []string
}

// session is one signed-in browser. It holds no token of the person: the
// console acts as them by impersonation, so nothing here could be replayed
// against the identity provider or the bridge.
type session struct {
	id      string
	csrf    string
	person  Person
	expires time.Time // absolute: the person signs in again after it

	mu       sync.Mutex
	lastSeen time.Time
	flash    []flash
	access   map[accessKey]accessAnswer
	kube     *personClients
}

// flash is a message shown once, on the page a form post redirects to, so
// that the outcome of a decision never travels in a URL.
type flash struct {
	Error bool
	Text  string
}

func (s *session) addFlash(f flash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.flash) < 8 {
		s.flash = append(s.flash, f)
	}
}

func (s *session) takeFlash() []flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flash
	s.flash = nil
	return f
}

// pendingSignIn is what the callback needs to finish a sign-in it started:
// the PKCE verifier, the nonce the ID token must carry, where to go after,
// and the value of the sign-in cookie that proves the same browser returns.
type pendingSignIn struct {
	verifier string
	nonce    string
	next     string
	binding  string
	expires  time.Time
}

// sessions keeps sessions and pending sign-ins in memory: the console runs
// one replica and a restart signs everyone out (they sign in again).
type sessions struct {
	maxAge, idle time.Duration
	now          func() time.Time

	mu        sync.Mutex
	byID      map[string]*session
	pending   map[string]pendingSignIn // by OAuth state
	lastSweep time.Time
}

// Bounds on what unauthenticated requests can make the console hold.
const (
	maxPendingSignIns = 10000
	signInTimeout     = 10 * time.Minute
	maxSessions       = 10000
)

func newSessions(maxAge, idle time.Duration, now func() time.Time) *sessions {
	return &sessions{maxAge: maxAge, idle: idle, now: now, byID: map[string]*session{}, pending: map[string]pendingSignIn{}}
}

// randomToken is 32 random bytes, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) sweepLocked(now time.Time) {
	if now.Sub(s.lastSweep) < time.Minute {
		return
	}
	s.lastSweep = now
	for id, x := range s.byID {
		if s.expired(x, now) {
			delete(s.byID, id)
		}
	}
	for state, p := range s.pending {
		if now.After(p.expires) {
			delete(s.pending, state)
		}
	}
}

func (s *sessions) expired(x *session, now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return now.After(x.expires) || now.Sub(x.lastSeen) > s.idle
}

// startSignIn records a sign-in in progress and returns its state.
func (s *sessions) startSignIn(p pendingSignIn) (string, bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	if len(s.pending) >= maxPendingSignIns {
		return "", false
	}
	state := randomToken()
	p.expires = now.Add(signInTimeout)
	s.pending[state] = p
	return state, true
}

// finishSignIn takes the sign-in of state, once: a replayed callback finds
// nothing.
func (s *sessions) finishSignIn(state string) (pendingSignIn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[state]
	delete(s.pending, state)
	if !ok || s.now().After(p.expires) {
		return pendingSignIn{}, false
	}
	return p, true
}

// create starts a session for person; it ends after the maximum age, or
// sooner when unused for the idle time.
func (s *sessions) create(person Person) (*session, bool) {
	now := s.now()
	x := &session{id: randomToken(), csrf: randomToken(), person: person, expires: now.Add(s.maxAge), lastSeen: now, access: map[accessKey]accessAnswer{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	if len(s.byID) >= maxSessions {
		return nil, false
	}
	s.byID[x.id] = x
	return x, true
}

// get returns the live session of id and marks it used.
func (s *sessions) get(id string) *session {
	now := s.now()
	s.mu.Lock()
	x := s.byID[id]
	s.mu.Unlock()
	if x == nil {
		return nil
	}
	if s.expired(x, now) {
		s.end(id)
		return nil
	}
	x.mu.Lock()
	x.lastSeen = now
	x.mu.Unlock()
	return x
}

// alive says whether a session still holds, without counting as use (a
// page's event stream must not keep a session from idling out).
func (s *sessions) alive(x *session) bool {
	s.mu.Lock()
	_, ok := s.byID[x.id]
	s.mu.Unlock()
	return ok && !s.expired(x, s.now())
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
}

func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// validCSRF compares a form's token with the session's.
func validCSRF(x *session, token string) bool { return equalSecret(token, x.csrf) }

// equalSecret compares two secrets in constant time; empty never matches.
func equalSecret(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// setCookie writes an HttpOnly cookie; secure is off only in local
// development over plain HTTP on loopback.
func setCookie(w http.ResponseWriter, name, value, path string, maxAge time.Duration, sameSite http.SameSite, secure bool) {
	c := &http.Cookie{Name: name, Value: value, Path: path, HttpOnly: true, Secure: secure, SameSite: sameSite}
	if maxAge > 0 {
		c.MaxAge = int(maxAge.Seconds())
	} else {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}
