package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// SignInOptions name the OIDC client the console signs people in with.
type SignInOptions struct {
	// IssuerURL is the issuer, one the bridge trusts.
	IssuerURL string
	// ClientID and ClientSecret are the console's client at the issuer
	// (a confidential client; the secret may be empty for a public one).
	ClientID, ClientSecret string
	// Scopes asked for besides openid (default: profile, email).
	Scopes []string
	// HTTPClient talks to the issuer (nil: http.DefaultClient).
	HTTPClient *http.Client
}

// signIn is the authorization code flow with PKCE against one issuer.
type signIn struct {
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	client   *http.Client
}

func newSignIn(ctx context.Context, o SignInOptions, redirectURL string) (*signIn, error) {
	if o.IssuerURL == "" || o.ClientID == "" {
		return nil, errors.New("console: sign-in needs an issuer URL and a client id")
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, hc), o.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("console: while reading the issuer's discovery document: %w", err)
	}
	scopes := o.Scopes
	if len(scopes) == 0 {
		scopes = []string{"profile", "email"}
	}
	return &signIn{
		oauth: oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Endpoint: provider.Endpoint(),
			RedirectURL: redirectURL, Scopes: append([]string{oidc.ScopeOpenID}, scopes...)},
		verifier: provider.Verifier(&oidc.Config{ClientID: o.ClientID}),
		client:   hc,
	}, nil
}

// localPath keeps where to go after sign-in to a path of the console: never
// another site nor a scheme. Browsers drop tabs and newlines from a URL and
// read a backslash as a slash, so "/\t/host" or "/\\host" would leave the
// console: any control byte or backslash refuses the value, and what is left
// must parse as a path alone that starts with a single slash.
func localPath(next string) string {
	const home = "/approvals"
	u, err := url.Parse(next)
	if unsafeInPath(next) || err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		strings.HasPrefix(next, "//") || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") ||
		unsafeInPath(u.Path) { // decoded: "/%09/host" and "/%5Chost" leave as the raw ones do
		return home
	}
	return u.RequestURI()
}

// unsafeInPath says whether s holds a byte a browser drops or reads as a
// slash in a URL: a control byte, DEL or a backslash.
func unsafeInPath(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return true
		}
	}
	return false
}

// login starts a sign-in: the browser goes to the issuer with a fresh
// state, nonce and PKCE challenge; a cookie binds the sign-in to this
// browser. A person already signed in goes straight on.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	if s.sessionOf(r) != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	p := pendingSignIn{verifier: oauth2.GenerateVerifier(), nonce: randomToken(), next: next, binding: randomToken()}
	state := s.sessions.startSignIn(p)
	setCookie(w, signInCookie, p.binding, "/callback", signInTimeout, http.SameSiteLaxMode, s.secure)
	http.Redirect(w, r, s.signIn.oauth.AuthCodeURL(state, oidc.Nonce(p.nonce), oauth2.S256ChallengeOption(p.verifier)), http.StatusFound)
}

// callback finishes a sign-in: the state must be one this console started,
// in this browser, once; the code is redeemed with the PKCE verifier; the
// ID token must verify and carry the nonce; its claims become the person as
// the bridge maps them. Only the ID token's claims, never userinfo's: the
// bridge maps the claims of a token alone, and a person must have the same
// name and groups in both. No token is kept: the session holds the person.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	setCookie(w, signInCookie, "", "/callback", 0, http.SameSiteLaxMode, s.secure)
	p, ok := s.sessions.finishSignIn(q.Get("state"))
	c, err := r.Cookie(signInCookie)
	if !ok || err != nil || !equalSecret(c.Value, p.binding) {
		s.refuse(w, r, http.StatusBadRequest, "This sign-in was not started in this browser, was used already, or took too long. Sign in again.")
		return
	}
	if e := q.Get("error"); e != "" {
		// Anyone can send a browser here with any text: only a code the
		// standards define is shown, never the free-text description.
		if !authorizationErrors[e] {
			e = "an error the console does not know"
		}
		s.refuse(w, r, http.StatusUnauthorized, "The identity provider did not sign you in: "+e+". Sign in again.")
		return
	}
	ctx := oidc.ClientContext(r.Context(), s.signIn.client)
	tok, err := s.signIn.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(p.verifier))
	if err != nil {
		s.opts.Log.Info("sign-in code exchange failed", "error", err.Error())
		s.refuse(w, r, http.StatusUnauthorized, "The identity provider refused the sign-in code: "+oauthError(err)+". Sign in again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		s.refuse(w, r, http.StatusUnauthorized, "The identity provider sent no ID token.")
		return
	}
	idt, err := s.signIn.verifier.Verify(ctx, raw)
	if err != nil {
		s.refuse(w, r, http.StatusUnauthorized, "The ID token did not verify: "+err.Error())
		return
	}
	if !equalSecret(idt.Nonce, p.nonce) {
		s.refuse(w, r, http.StatusUnauthorized, "The ID token is not the one this sign-in asked for (nonce).")
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		s.refuse(w, r, http.StatusUnauthorized, "The ID token's claims could not be read.")
		return
	}
	id, err := s.opts.Mapper.Identity(claims)
	if err != nil {
		s.refuse(w, r, http.StatusForbidden, "Signed in, but who you are could not be mapped as the bridge maps it: "+err.Error())
		return
	}
	person := Person{Username: id.Username, Groups: id.Groups}
	x, ok := s.sessions.create(person)
	if !ok {
		s.refuse(w, r, http.StatusServiceUnavailable, "Too many people are signed in; try again later.")
		return
	}
	setCookie(w, sessionCookie, x.id, "/", time.Until(x.expires), http.SameSiteStrictMode, s.secure)
	s.opts.Log.Info("signed in", "user", person.Username)
	// The browser arrived here from the identity provider's site, so a
	// redirect would still be a cross-site navigation and the Strict
	// cookie would not be sent with it: a page of our own moves on, by
	// its Continue link (followed by the console script, or by a click).
	s.render(w, r, http.StatusOK, "signedin", page{Title: "Signed in", Data: p.next})
}

// authorizationErrors are the error codes of an authorization response
// (OAuth 2.0, RFC 6749 4.1.2.1, and OpenID Connect Core 3.1.2.6).
var authorizationErrors = map[string]bool{
	"invalid_request": true, "unauthorized_client": true, "access_denied": true, "unsupported_response_type": true,
	"invalid_scope": true, "server_error": true, "temporarily_unavailable": true,
	"interaction_required": true, "login_required": true, "account_selection_required": true, "consent_required": true,
	"invalid_request_uri": true, "invalid_request_object": true, "request_not_supported": true,
	"request_uri_not_supported": true, "registration_not_supported": true,
}

// tokenErrors are the error codes of a token endpoint (RFC 6749 5.2).
var tokenErrors = map[string]bool{
	"invalid_request": true, "invalid_client": true, "invalid_grant": true, "unauthorized_client": true,
	"unsupported_grant_type": true, "invalid_scope": true,
}

// oauthError names why a code exchange failed by the standard's error code
// alone: the provider's free text (error_description, a response body, a
// transport error naming hosts) goes to the log, not onto the console's
// origin, where it would read as the console's own words.
func oauthError(err error) string {
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re) && tokenErrors[re.ErrorCode]:
		return re.ErrorCode
	case errors.As(err, &re):
		return "an error the console does not know"
	default:
		return "the identity provider could not be reached"
	}
}

// logout ends the session here; the identity provider's own session is
// the provider's to end.
func (s *Server) logout(w http.ResponseWriter, r *http.Request, x *session) {
	s.sessions.end(x.id)
	setCookie(w, sessionCookie, "", "/", 0, http.SameSiteStrictMode, s.secure)
	s.render(w, r, http.StatusOK, "signedout", page{Title: "Signed out"})
}
