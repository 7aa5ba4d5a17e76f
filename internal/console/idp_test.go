package console

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testIDP is an OIDC provider on loopback for the console's sign-in tests:
// discovery, JWKS, an authorization endpoint that signs in whoever the
// test says is at the browser, and a token endpoint that checks the client
// secret, the redirect URI and the PKCE verifier and issues an RS256 ID
// token. misbehave lets a test make it send a token the console must
// refuse (another audience, another nonce, another issuer).
type testIDP struct {
	srv      *httptest.Server
	key      *rsa.PrivateKey
	clientID string
	secret   string

	mu    sync.Mutex
	user  map[string]any // the claims of whoever signs in next
	codes map[string]authCode
	// misbehave changes the ID token's claims before signing.
	misbehave func(claims map[string]any)
	// userinfo is what the userinfo endpoint answers (any bearer).
	userinfo map[string]any
}

type authCode struct {
	challenge, redirect, nonce string
	claims                     map[string]any
}

func newTestIDP(t *testing.T) *testIDP {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &testIDP{key: key, clientID: "mcp-console", secret: "console-secret", codes: map[string]authCode{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		iss := p.srv.URL
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": iss, "authorization_endpoint": iss + "/authorize", "token_endpoint": iss + "/token",
			"jwks_uri": iss + "/jwks", "userinfo_endpoint": iss + "/userinfo", "response_types_supported": []string{"code"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"},
			"code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	mux.HandleFunc("GET /userinfo", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.userinfo)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// signInAs sets who is at the browser when the console sends it here.
func (p *testIDP) signInAs(claims map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = claims
}

func (p *testIDP) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != p.clientID || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	code := randomToken()
	p.codes[code] = authCode{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), nonce: q.Get("nonce"), claims: p.user}
	p.mu.Unlock()
	back, _ := url.Parse(q.Get("redirect_uri"))
	v := url.Values{"code": {code}, "state": {q.Get("state")}}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (p *testIDP) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	// A provider's free text, which the console must not show as its own.
	fail := func(code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "Call +1 555 0100 to unlock your account"})
	}
	if id != p.clientID || secret != p.secret {
		fail("invalid_client")
		return
	}
	p.mu.Lock()
	c, found := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code"))
	misbehave := p.misbehave
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if !found || c.redirect != r.PostForm.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
		fail("invalid_grant")
		return
	}
	now := time.Now()
	claims := map[string]any{"iss": p.srv.URL, "aud": p.clientID, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "nonce": c.nonce}
	for k, v := range c.claims {
		claims[k] = v
	}
	if misbehave != nil {
		misbehave(claims)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: p.key, KeyID: "k1"}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		fail("server_error")
		return
	}
	idToken, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		fail("server_error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": randomToken(), "token_type": "Bearer", "expires_in": 300, "id_token": idToken})
}
