package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	provider *oidc.Provider
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
		provider: provider,
		client:   hc,
	}, nil
}

// localPath keeps where to go after sign-in to a path of the console: never
// another site (//host, /\host) nor a scheme.
func localPath(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/approvals"
	}
	return next
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
	state, ok := s.sessions.startSignIn(p)
	if !ok {
		s.refuse(w, r, http.StatusServiceUnavailable, "Too many sign-ins in progress; try again in a few minutes.")
		return
	}
	setCookie(w, signInCookie, p.binding, "/callback", signInTimeout, http.SameSiteLaxMode, s.secure)
	http.Redirect(w, r, s.signIn.oauth.AuthCodeURL(state, oidc.Nonce(p.nonce), oauth2.S256ChallengeOption(p.verifier)), http.StatusFound)
}

// callback finishes a sign-in: the state must be one this console started,
// in this browser, once; the code is redeemed with the PKCE verifier; the
// ID token must verify and carry the nonce; its claims become the person as
// the bridge maps them. No token is kept: the session holds the person.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	setCookie(w, signInCookie, "", "/callback", 0, http.SameSiteLaxMode, s.secure)
	if e := q.Get("error"); e != "" {
		s.refuse(w, r, http.StatusUnauthorized, "The identity provider did not sign you in: "+e+" "+q.Get("error_description"))
		return
	}
	p, ok := s.sessions.finishSignIn(q.Get("state"))
	c, err := r.Cookie(signInCookie)
	if !ok || err != nil || !equalSecret(c.Value, p.binding) {
		s.refuse(w, r, http.StatusBadRequest, "This sign-in was not started in this browser, was used already, or took too long. Sign in again.")
		return
	}
	ctx := oidc.ClientContext(r.Context(), s.signIn.client)
	tok, err := s.signIn.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(p.verifier))
	if err != nil {
		s.refuse(w, r, http.StatusUnauthorized, "The identity provider refused the sign-in code: "+oauthError(err))
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
	if err := s.signIn.addUserInfo(ctx, tok, idt.Subject, claims); err != nil {
		s.refuse(w, r, http.StatusUnauthorized, "The identity provider's userinfo could not be read: "+err.Error())
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
	// cookie would not be sent with it: a page of our own moves on.
	s.render(w, r, http.StatusOK, "signedin", page{Title: "Signed in", Data: p.next})
}

// addUserInfo adds the claims of the provider's userinfo endpoint to the ID
// token's, which win: many providers put only sub in an ID token issued
// with an access token, and the groups (or the email) the mapping names
// are in userinfo. Its sub must be the ID token's (OpenID Connect Core
// 5.3.2), so another person's claims can never be mixed in.
func (si *signIn) addUserInfo(ctx context.Context, tok *oauth2.Token, subject string, claims map[string]any) error {
	if si.provider.UserInfoEndpoint() == "" {
		return nil
	}
	info, err := si.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return err
	}
	if info.Subject != subject {
		return errors.New("its subject is not the ID token's")
	}
	var extra map[string]any
	if err := info.Claims(&extra); err != nil {
		return err
	}
	for k, v := range extra {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
	return nil
}

func oauthError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		return re.ErrorCode + " " + re.ErrorDescription
	}
	return err.Error()
}

// logout ends the session here; the identity provider's own session is
// the provider's to end.
func (s *Server) logout(w http.ResponseWriter, r *http.Request, x *session) {
	s.sessions.end(x.id)
	setCookie(w, sessionCookie, "", "/", 0, http.SameSiteStrictMode, s.secure)
	s.render(w, r, http.StatusOK, "signedout", page{Title: "Signed out"})
}
