// Package oauthtest is an OAuth issuer for tests and benchmarks, on
// loopback: it serves OIDC discovery, a JWKS and RFC 7662 introspection,
// and signs access tokens with go-jose. Its keys rotate on demand. It is
// not an authorization server (it issues nothing through OAuth flows):
// tests mint the tokens they need, including the ones an attacker would.
package oauthtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Introspection client of the issuer's introspection endpoint.
const (
	ClientID     = "mcp-bridge"
	ClientSecret = "test-only-secret"
)

// Issuer is a running test issuer.
type Issuer struct {
	URL    string
	server *httptest.Server
	// JWKSFetches counts the GETs of the JWKS.
	JWKSFetches atomic.Int64
	// Down makes the JWKS answer 503, as an issuer in an outage does.
	Down atomic.Bool
	// OAuthOnly serves RFC 8414 metadata alone, no OIDC discovery.
	OAuthOnly atomic.Bool
	// ClaimedIssuer, when set, is the issuer the metadata names instead
	// of URL (an issuer mix-up).
	ClaimedIssuer atomic.Pointer[string]

	mu     sync.Mutex
	keys   []key // published; the last signs by default
	n      int
	opaque map[string]map[string]any
}

type key struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

// New starts an issuer with one RS256 key. Stop it with Close.
func New() *Issuer {
	i := &Issuer{opaque: map[string]map[string]any{}}
	mux := http.NewServeMux()
	metadata := func(w http.ResponseWriter, _ *http.Request) {
		issuer := i.URL
		if v := i.ClaimedIssuer.Load(); v != nil {
			issuer = *v
		}
		writeJSON(w, map[string]any{
			"issuer": issuer, "jwks_uri": i.URL + "/jwks", "introspection_endpoint": i.URL + "/introspect",
			"authorization_endpoint": i.URL + "/authorize", "token_endpoint": i.URL + "/token",
		})
	}
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		if i.OAuthOnly.Load() {
			http.NotFound(w, r)
			return
		}
		metadata(w, r)
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", metadata)
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		i.JWKSFetches.Add(1)
		if i.Down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, i.JWKS())
	})
	mux.HandleFunc("/introspect", i.introspect)
	i.server = httptest.NewServer(mux)
	i.URL = i.server.URL
	i.AddKey(jose.RS256)
	return i
}

// Close stops the issuer.
func (i *Issuer) Close() { i.server.Close() }

// AddKey publishes a new key of alg (RS256, ES256) that signs from now on,
// as an issuer rotating its keys does; it returns the key's kid.
func (i *Issuer) AddKey(alg jose.SignatureAlgorithm) string {
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		panic(err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.n++
	kid := fmt.Sprintf("key-%d", i.n)
	i.keys = append(i.keys, key{kid: kid, alg: alg, priv: priv})
	return kid
}

// RemoveKey stops publishing kid.
func (i *Issuer) RemoveKey(kid string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for n, k := range i.keys {
		if k.kid == kid {
			i.keys = append(i.keys[:n], i.keys[n+1:]...)
			return
		}
	}
}

// JWKS is the published key set.
func (i *Issuer) JWKS() jose.JSONWebKeySet {
	i.mu.Lock()
	defer i.mu.Unlock()
	var set jose.JSONWebKeySet
	for _, k := range i.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
	}
	return set
}

// Claims are an access token's claims for sub, with audience aud, issued
// now and valid for an hour.
func (i *Issuer) Claims(sub, aud string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": i.URL, "sub": sub, "aud": aud,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

// Sign signs claims with the newest key.
func (i *Issuer) Sign(claims map[string]any) string {
	i.mu.Lock()
	k := i.keys[len(i.keys)-1]
	i.mu.Unlock()
	return SignWith(k.alg, k.priv, k.kid, claims)
}

// SignWithKid signs claims with the key kid (published or removed since).
func (i *Issuer) SignWithKid(kid string, claims map[string]any) string {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, k := range i.keys {
		if k.kid == kid {
			return SignWith(k.alg, k.priv, k.kid, claims)
		}
	}
	panic("no key " + kid)
}

// Key is the newest key's private key and kid (a test signs as a removed
// key with it after RemoveKey).
func (i *Issuer) Key() (crypto.Signer, string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	k := i.keys[len(i.keys)-1]
	return k.priv, k.kid
}

// SignWith signs claims with any key: alg and key as go-jose takes them
// (an []byte key with HS256 makes the forgery an attacker would try).
func SignWith(alg jose.SignatureAlgorithm, k any, kid string, claims map[string]any) string {
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: k}, opts)
	if err != nil {
		panic(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		panic(err)
	}
	return tok
}

// Opaque makes token an opaque token whose introspection answers claims
// (with active true).
func (i *Issuer) Opaque(token string, claims map[string]any) {
	i.mu.Lock()
	defer i.mu.Unlock()
	c := map[string]any{"active": true}
	for k, v := range claims {
		c[k] = v
	}
	i.opaque[token] = c
}

func (i *Issuer) introspect(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok || id != ClientID || secret != ClientSecret || r.Method != http.MethodPost {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	i.mu.Lock()
	c, ok := i.opaque[r.PostFormValue("token")]
	i.mu.Unlock()
	if !ok {
		c = map[string]any{"active": false}
	}
	writeJSON(w, c)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
