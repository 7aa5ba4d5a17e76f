package bridgetest

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// TokenEndpoint is an OAuth 2.0 token endpoint on loopback that serves the
// token exchange of RFC 8693 (section 2) and nothing else, strictly: a
// POST of a form, the client authenticated with HTTP Basic, grant_type
// token-exchange, a subject_token it issued, subject_token_type
// access_token, and the audience it was told. It issues a new opaque token
// per exchange, named after the subject's user, and refuses anything else
// with an RFC 6749 error whose description quotes the subject token (as
// careless endpoints do), so tests can check the bridge never repeats it.
//
// It stands in for a real authorization server where a test needs to
// count and fail exchanges on demand; the identity provider of the dev
// environment serves the same grant for the end-to-end tests.
type TokenEndpoint struct {
	URL string
	// ClientID and ClientSecret are the client it accepts.
	ClientID, ClientSecret string
	// Audience is the audience it requires.
	Audience string
	// ExpiresIn is the lifetime it gives tokens, in seconds (0: none given).
	ExpiresIn int

	mu sync.Mutex
	// subjects maps the subject tokens it accepts to their users.
	subjects map[string]string
	issued   int
	// refusals counts the exchanges of a valid client it refused.
	refusals int
	// exchanges counts the exchanges it answered, by user.
	exchanges map[string]int
	refuse    string // an error code every exchange gets, when set
}

// NewTokenEndpoint starts one for the test; subjects maps the subject
// tokens it accepts (the callers' own tokens) to their users.
func NewTokenEndpoint(t testing.TB, audience string, subjects map[string]string) *TokenEndpoint {
	te := &TokenEndpoint{ClientID: "mcp-bridge", ClientSecret: "bridge-client-secret-0123456789", Audience: audience, ExpiresIn: 3600,
		subjects: subjects, exchanges: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(te.serve))
	t.Cleanup(srv.Close)
	te.URL = srv.URL + "/oauth/token"
	return te
}

// Refuse makes every exchange from now on fail with code ("": none fail).
func (te *TokenEndpoint) Refuse(code string) {
	te.mu.Lock()
	te.refuse = code
	te.mu.Unlock()
}

// Exchanges is how many exchanges it answered for user's token.
func (te *TokenEndpoint) Exchanges(user string) int {
	te.mu.Lock()
	defer te.mu.Unlock()
	return te.exchanges[user]
}

// Refusals is how many exchanges by the right client it refused.
func (te *TokenEndpoint) Refusals() int {
	te.mu.Lock()
	defer te.mu.Unlock()
	return te.refusals
}

func (te *TokenEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, code, desc string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
	}
	if r.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, "invalid_request", "POST only")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		fail(http.StatusBadRequest, "invalid_request", "a form is required")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok || id != te.ClientID || secret != te.ClientSecret {
		w.Header().Set("WWW-Authenticate", `Basic realm="token"`)
		fail(http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	if err := r.ParseForm(); err != nil || r.URL.RawQuery != "" {
		fail(http.StatusBadRequest, "invalid_request", "parameters go in the body")
		return
	}
	f := r.PostForm
	if f.Get("client_secret") != "" {
		fail(http.StatusBadRequest, "invalid_request", "one client authentication method only")
		return
	}
	if f.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" {
		fail(http.StatusBadRequest, "unsupported_grant_type", "token exchange only")
		return
	}
	subject := f.Get("subject_token")
	if f.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:access_token" {
		fail(http.StatusBadRequest, "invalid_request", "unsupported subject_token_type for "+subject)
		return
	}
	if len(f["audience"]) != 1 || f.Get("audience") != te.Audience {
		fail(http.StatusBadRequest, "invalid_target", "this client may not ask for audience "+strconv.Quote(f.Get("audience")))
		return
	}
	te.mu.Lock()
	defer te.mu.Unlock()
	user, known := te.subjects[subject]
	switch {
	case te.refuse != "":
		te.refusals++
		fail(http.StatusBadRequest, te.refuse, "refused the subject token "+subject)
		return
	case !known:
		te.refusals++
		fail(http.StatusBadRequest, "invalid_grant", "the subject token "+subject+" is not valid")
		return
	}
	te.issued++
	te.exchanges[user]++
	body := map[string]any{
		"access_token":      fmt.Sprintf("exchanged-%s-%d-for-%s", user, te.issued, te.Audience),
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
		"token_type":        "Bearer",
	}
	if te.ExpiresIn > 0 {
		body["expires_in"] = te.ExpiresIn
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(body)
}
