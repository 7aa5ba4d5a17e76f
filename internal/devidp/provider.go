// Package devidp is a real OAuth 2.1 / OpenID Connect provider for tests and local development,
// built on zitadel's op package: in-memory users, clients and signing keys, the authorization
// code grant with PKCE (S256 only), refresh tokens, client credentials, RFC 8693 token exchange,
// RFC 8707 resource indicators as the access token's audience, RS256 JWT access tokens, dynamic
// client registration for native clients (loopback and private-use redirects) and a script-free
// login page.
//
// It is not for real people: the default users' passwords and clients' secrets are published in
// this package.
//
// Tokens name a person by `sub` and `email` (both the email address, e.g. alice@example.com),
// with `preferred_username` (alice) and `groups`. A client credentials token's `sub` is the
// client id; the default agent client adds `preferred_username` and `groups`.
package devidp

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"

	httphelper "github.com/zitadel/oidc/v3/pkg/http"
)

const (
	authorizePath = "/authorize" // op's default, which New keeps
	loginPath     = "/login"
	registerPath  = "/register"
)

// Config says what a Provider serves.
type Config struct {
	// Issuer is the URL every client and resource server uses, with no path: scheme, host and
	// port. It may be http only for a loopback address or when AllowInsecure is set.
	Issuer string
	// AllowInsecure permits an http issuer on a non-loopback address (a development cluster
	// whose pods reach the host by its address).
	AllowInsecure bool
	// Users defaults to Alice and Bob; Clients to DefaultClients().
	Users   []User
	Clients []Client
	// BridgeResources are the resources the mcp-bridge client serves (the bridge's public URL:
	// its MCP endpoints are beneath it), its ExchangeAudiences unless Clients sets them.
	BridgeResources []string
	// AccessTokenLifetime defaults to one hour.
	AccessTokenLifetime time.Duration
}

// Provider is an http.Handler serving the provider at its issuer URL.
type Provider struct {
	issuer  string
	store   *storage
	op      *op.Provider
	handler http.Handler
}

// New builds a provider; serve it at cfg.Issuer.
func New(cfg Config) (*Provider, error) {
	issuer, err := url.Parse(cfg.Issuer)
	if err != nil || issuer.Host == "" || (issuer.Path != "" && issuer.Path != "/") || issuer.RawQuery != "" || issuer.Fragment != "" {
		return nil, fmt.Errorf("issuer %q: want scheme://host[:port] with no path, query or fragment", cfg.Issuer)
	}
	issuer.Path = ""
	if cfg.Users == nil {
		cfg.Users = []User{Alice, Bob}
	}
	if cfg.Clients == nil {
		cfg.Clients = DefaultClients()
	}
	if cfg.AccessTokenLifetime == 0 {
		cfg.AccessTokenLifetime = time.Hour
	}
	keys, err := newKeyRing()
	if err != nil {
		return nil, err
	}
	p := &Provider{issuer: issuer.String()}
	p.store = &storage{
		now:  time.Now,
		keys: keys, tokenLifetime: cfg.AccessTokenLifetime, loginURL: p.issuer + loginPath,
		users: map[string]*User{}, clients: map[string]*Client{},
		authRequests: map[string]*authRequest{}, codes: map[string]issuedCode{},
		accessTokens: map[string]*accessGrant{}, refresh: map[string]*refreshGrant{},
	}
	for i := range cfg.Users {
		p.store.users[cfg.Users[i].Username] = &cfg.Users[i]
	}
	for i := range cfg.Clients {
		c := cfg.Clients[i]
		if c.ID == BridgeClientID && c.ExchangeAudiences == nil {
			c.ExchangeAudiences = cfg.BridgeResources
		}
		p.store.clients[c.ID] = &c
	}

	opConfig := &op.Config{
		CodeMethodS256:        true,
		AuthMethodPost:        true,
		GrantTypeRefreshToken: true,
		SupportedUILocales:    []language.Tag{language.English},
	}
	// The key encrypts authorization codes; a new one each start is right for a provider that
	// forgets everything when it stops.
	if _, err := rand.Read(opConfig.CryptoKey[:]); err != nil {
		return nil, err
	}
	var opts []op.Option
	if cfg.AllowInsecure || loopbackHTTP(issuer) {
		opts = append(opts, op.WithAllowInsecure())
	}
	p.op, err = op.NewProvider(opConfig, p.store, op.StaticIssuer(p.issuer), opts...)
	if err != nil {
		return nil, fmt.Errorf("while building the provider: %w", err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc(loginPath, p.login)
	mux.HandleFunc(registerPath, p.register)
	mux.HandleFunc("/.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("/.well-known/oauth-authorization-server", p.discovery)
	mux.Handle(authorizePath, resourceIndicators(p.op))
	mux.Handle(p.op.TokenEndpoint().Relative(), resourceIndicators(p.op))
	mux.Handle("/", p.op)
	p.handler = mux
	return p, nil
}

func loopbackHTTP(u *url.URL) bool {
	_, loopback := op.HTTPLoopbackOrLocalhost(u.String())
	return loopback && u.Scheme == "http"
}

func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.handler.ServeHTTP(w, r) }

// Issuer is the issuer URL, as it appears in tokens' `iss`.
func (p *Provider) Issuer() string { return p.issuer }

// discovery serves the OpenID configuration at both its OIDC and its RFC 8414 location, with the
// registration endpoint op does not know about and without the endpoints this provider leaves
// unused.
func (p *Provider) discovery(w http.ResponseWriter, r *http.Request) {
	doc := op.CreateDiscoveryConfig(op.ContextWithIssuer(r.Context(), p.issuer), p.op, p.store)
	doc.RegistrationEndpoint = p.issuer + registerPath
	doc.DeviceAuthorizationEndpoint, doc.CheckSessionIframe = "", ""
	doc.TokenEndpointAuthMethodsSupported = []oidc.AuthMethod{oidc.AuthMethodNone, oidc.AuthMethodBasic, oidc.AuthMethodPost}
	httphelper.MarshalJSON(w, doc)
}

// RotateKey makes a new key sign from now on and returns its id; the previous keys stay in the
// JWKS until RemoveKey, so tokens they signed still verify.
func (p *Provider) RotateKey() (string, error) { return p.store.keys.rotate() }

// RemoveKey takes a key out of the JWKS: tokens it signed no longer verify anywhere that
// refetches the JWKS. The key signing now cannot be removed.
func (p *Provider) RemoveKey(id string) error { return p.store.keys.remove(id) }

// KeyIDs lists the published keys' ids, oldest first; the last one signs.
func (p *Provider) KeyIDs() []string { return p.store.keys.ids() }

// RevokeAccessToken forgets an issued access token by its `jti`, as if its grant were withdrawn.
func (p *Provider) RevokeAccessToken(jti string) error {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	if _, ok := p.store.accessTokens[jti]; !ok {
		return errors.New("no such access token")
	}
	delete(p.store.accessTokens, jti)
	return nil
}
