package devidp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage keeps everything in memory: users, clients, keys, pending authorization requests and
// issued tokens. It implements op.Storage, op.ClientCredentialsStorage and op.TokenExchangeStorage.
type storage struct {
	keys          *keyRing
	tokenLifetime time.Duration
	loginURL      string

	// now is the clock authorization requests and codes expire by (tests move it).
	now func() time.Time

	mu           sync.Mutex
	users        map[string]*User // by Username
	clients      map[string]*Client
	dynamic      int // clients registered dynamically, at most maxDynamicClients
	authRequests map[string]*authRequest
	codes        map[string]issuedCode
	accessTokens map[string]*accessGrant
	refresh      map[string]*refreshGrant
}

var (
	_ op.Storage                        = (*storage)(nil)
	_ op.ClientCredentialsStorage       = (*storage)(nil)
	_ op.TokenExchangeStorage           = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest      = (*storage)(nil)
	_ op.CanGetPrivateClaimsFromRequest = (*storage)(nil)
)

var errNotFound = errors.New("not found")

// authRequestLifetime bounds both a sign-in (from /authorize to the login form's answer) and the
// code it yields (RFC 6749 section 4.1.2: ten minutes at most), so neither can be used long
// after the person left, and forgotten ones do not pile up.
const authRequestLifetime = 10 * time.Minute

// issuedCode is an authorization code's request and when it was issued.
type issuedCode struct {
	requestID string
	issued    time.Time
}

// expireLocked forgets authorization requests and codes older than authRequestLifetime.
func (s *storage) expireLocked() {
	cutoff := s.now().Add(-authRequestLifetime)
	maps.DeleteFunc(s.authRequests, func(_ string, a *authRequest) bool { return a.created.Before(cutoff) })
	maps.DeleteFunc(s.codes, func(_ string, c issuedCode) bool {
		_, pending := s.authRequests[c.requestID]
		return !pending || c.issued.Before(cutoff)
	})
}

func randomID() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on a supported platform
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// userBySubject finds a person by the token subject (their email).
func (s *storage) userBySubject(subject string) *User {
	for _, u := range s.users {
		if u.Email == subject {
			return u
		}
	}
	return nil
}

// subjectClaims are the claims that name the subject of a token: a person's, or for a client
// acting for itself (client credentials), the client's configured claims.
func (s *storage) subjectClaims(subject string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.userBySubject(subject); u != nil {
		return u.claims(), nil
	}
	if c, ok := s.clients[subject]; ok {
		return maps.Clone(c.Claims), nil
	}
	return nil, fmt.Errorf("subject %q: %w", subject, errNotFound)
}

// --- authorization requests ---

func (s *storage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	// OAuth 2.1 requires PKCE, and the plain method adds nothing over no PKCE at all.
	if req.CodeChallenge == "" || req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE with code_challenge_method S256 is required")
	}
	a := &authRequest{id: randomID(), req: req, resources: resourcesFrom(ctx), created: s.now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	s.authRequests[a.id] = a
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	a, ok := s.authRequests[id]
	if !ok {
		return nil, fmt.Errorf("authorization request: %w", errNotFound)
	}
	return a, nil
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	s.expireLocked()
	c, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("code: %w", errNotFound)
	}
	return s.AuthRequestByID(ctx, c.requestID)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = issuedCode{requestID: id, issued: s.now()}
	return nil
}

// DeleteAuthRequest runs when a code is redeemed, so a code works once.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.authRequests, id)
	maps.DeleteFunc(s.codes, func(_ string, c issuedCode) bool { return c.requestID == id })
	return nil
}

// completeLogin marks an authorization request as signed in by the user with these credentials.
// A request signs in once: a second answer to the same form (another person's, a replayed post)
// could otherwise change whose code the client is about to redeem.
func (s *storage) completeLogin(id, username, password string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	a, ok := s.authRequests[id]
	if !ok {
		return errUnknownRequest
	}
	if a.done {
		return errAlreadySignedIn
	}
	u, ok := s.users[username]
	if !ok || !secretMatches(u.Password, password) {
		return errBadCredentials
	}
	a.subject, a.authTime, a.done = u.Email, s.now(), true
	return nil
}

var (
	errUnknownRequest  = errors.New("this sign-in request is unknown or has expired: start again from the application")
	errBadCredentials  = errors.New("wrong username or password")
	errAlreadySignedIn = errors.New("this sign-in request is already complete: start again from the application")
)

// --- tokens ---

func (s *storage) grantOf(req op.TokenRequest) *accessGrant {
	g := &accessGrant{subject: req.GetSubject(), audience: req.GetAudience(), scopes: req.GetScopes(), expires: time.Now().Add(s.tokenLifetime)}
	switch r := req.(type) {
	case interface{ GetClientID() string }:
		g.clientID = r.GetClientID()
	case *clientRequest:
		g.clientID = r.clientID
	}
	return g
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	g := s.grantOf(req)
	id := randomID()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accessTokens[id] = g
	return id, g.expires, nil
}

func (s *storage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	id, expires, err := s.CreateAccessToken(ctx, req)
	if err != nil {
		return "", "", time.Time{}, err
	}
	g := s.grantOf(req)
	r := &refreshGrant{token: randomID(), subject: g.subject, clientID: g.clientID, audience: g.audience, scopes: g.scopes}
	if a, ok := req.(interface {
		GetAMR() []string
		GetAuthTime() time.Time
	}); ok {
		r.amr, r.authTime = a.GetAMR(), a.GetAuthTime()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Refresh tokens rotate: the one just used stops working.
	delete(s.refresh, current)
	s.refresh[r.token] = r
	return id, r.token, expires, nil
}

func (s *storage) TokenRequestByRefreshToken(_ context.Context, token string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refresh[token]
	if !ok {
		return nil, op.ErrInvalidRefreshToken
	}
	return r, nil
}

func (s *storage) GetRefreshTokenInfo(_ context.Context, clientID, token string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refresh[token]
	if !ok || r.clientID != clientID {
		return "", "", op.ErrInvalidRefreshToken
	}
	return r.subject, r.token, nil
}

func (s *storage) TerminateSession(_ context.Context, userID, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.DeleteFunc(s.refresh, func(_ string, r *refreshGrant) bool { return r.subject == userID && r.clientID == clientID })
	maps.DeleteFunc(s.accessTokens, func(_ string, g *accessGrant) bool { return g.subject == userID && g.clientID == clientID })
	return nil
}

func (s *storage) RevokeToken(_ context.Context, tokenOrID, _, clientID string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.accessTokens[tokenOrID]; ok {
		if g.clientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("the token was issued to another client")
		}
		delete(s.accessTokens, tokenOrID)
		return nil
	}
	if r, ok := s.refresh[tokenOrID]; ok {
		if r.clientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("the token was issued to another client")
		}
		delete(s.refresh, tokenOrID)
	}
	return nil
}

// activeGrant returns an issued access token's record while it is neither revoked nor expired.
func (s *storage) activeGrant(id string) (*accessGrant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.accessTokens[id]
	if !ok || time.Now().After(g.expires) {
		return nil, false
	}
	return g, true
}

// --- keys ---

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return s.keys.signing(), nil }
func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}
func (s *storage) KeySet(context.Context) ([]op.Key, error) { return s.keys.public(), nil }

// --- clients ---

func (s *storage) client(id string) (*Client, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	return c, ok
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c, ok := s.client(id)
	if !ok {
		return nil, fmt.Errorf("client %q: %w", id, errNotFound)
	}
	return &opClient{Client: *c, loginURL: s.loginURL}, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	c, ok := s.client(id)
	if !ok || c.Secret == "" || !secretMatches(c.Secret, secret) {
		return errors.New("unknown client or wrong secret")
	}
	return nil
}

func (s *storage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	return s.GetClientByClientID(ctx, id)
}

func (s *storage) ClientCredentialsTokenRequest(ctx context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	return &clientRequest{clientID: clientID, scopes: scopes, resources: resourcesFrom(ctx)}, nil
}

// --- claims ---

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil // superseded by SetUserinfoFromRequest
}

func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, _ []string) error {
	return s.setUserinfo(info, req.GetSubject())
}

func (s *storage) setUserinfo(info *oidc.UserInfo, subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.userBySubject(subject); u != nil {
		u.userInfo(info)
		return nil
	}
	if c, ok := s.clients[subject]; ok {
		info.Subject = c.ID
		for k, v := range c.Claims {
			info.AppendClaims(k, v)
		}
		return nil
	}
	return fmt.Errorf("subject %q: %w", subject, errNotFound)
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	if _, ok := s.activeGrant(tokenID); !ok {
		return errors.New("the access token is revoked or expired")
	}
	return s.setUserinfo(info, subject)
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, _ string) error {
	g, ok := s.activeGrant(tokenID)
	if !ok {
		return nil // inactive: the response says active=false
	}
	info := new(oidc.UserInfo)
	if err := s.setUserinfo(info, subject); err != nil {
		return err
	}
	resp.SetUserInfo(info)
	resp.Active, resp.Subject, resp.ClientID = true, subject, g.clientID
	resp.Audience, resp.Scope, resp.Expiration = g.audience, g.scopes, oidc.FromTime(g.expires)
	return nil
}

func (s *storage) GetPrivateClaimsFromScopes(_ context.Context, subject, _ string, _ []string) (map[string]any, error) {
	return s.subjectClaims(subject)
}

// GetPrivateClaimsFromRequest puts the subject's name and groups in every access token: a
// resource server reads them from the token, whatever scopes were asked for.
func (s *storage) GetPrivateClaimsFromRequest(_ context.Context, req op.TokenRequest, _ []string) (map[string]any, error) {
	return s.subjectClaims(req.GetSubject())
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("the JWT profile grant is not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("the JWT profile grant is not supported")
}

func (s *storage) Health(context.Context) error { return nil }

// --- RFC 8693 token exchange ---

// ValidateTokenExchangeRequest lets a client holding the token-exchange grant trade a live access
// token of this provider for one whose audience is the requested resource, for the same subject.
func (s *storage) ValidateTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) error {
	c, ok := s.client(req.GetClientID())
	if !ok || !slices.Contains(c.GrantTypes, oidc.GrantTypeTokenExchange) {
		return oidc.ErrUnauthorizedClient().WithDescription("the client may not exchange tokens")
	}
	if req.GetExchangeSubjectTokenType() != oidc.AccessTokenType {
		return oidc.ErrInvalidRequest().WithDescription("subject_token_type must be %s", oidc.AccessTokenType)
	}
	subject, ok := s.activeGrant(req.GetExchangeSubjectTokenIDOrToken())
	if !ok {
		return oidc.ErrInvalidGrant().WithDescription("the subject token is revoked or expired")
	}
	if !slices.ContainsFunc(subject.audience, func(aud string) bool { return servesAudience(c.ExchangeAudiences, aud) }) {
		return oidc.ErrInvalidGrant().WithDescription("the subject token was not issued for a resource client %s serves", c.ID)
	}
	switch req.GetRequestedTokenType() {
	case "":
		req.SetRequestedTokenType(oidc.AccessTokenType)
	case oidc.AccessTokenType:
	default:
		return oidc.ErrInvalidRequest().WithDescription("requested_token_type must be %s", oidc.AccessTokenType)
	}
	if len(req.GetAudience()) == 0 {
		return errInvalidTarget("name the token's audience with resource or audience")
	}
	return nil
}

func (s *storage) CreateTokenExchangeRequest(context.Context, op.TokenExchangeRequest) error {
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest gives the exchanged token the subject's claims and an
// `act` claim naming the client that exchanged it (RFC 8693 section 4.1), so the upstream can see
// who acts for whom.
func (s *storage) GetPrivateClaimsFromTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) (map[string]any, error) {
	claims, err := s.subjectClaims(req.GetSubject())
	if err != nil {
		return nil, err
	}
	claims["act"] = map[string]any{"sub": req.GetClientID()}
	return claims, nil
}

func (s *storage) SetUserinfoFromTokenExchangeRequest(_ context.Context, info *oidc.UserInfo, req op.TokenExchangeRequest) error {
	return s.setUserinfo(info, req.GetSubject())
}

// servesAudience says whether aud is one of resources or a URL beneath one (a resource server's
// endpoints share its URL as their prefix).
func servesAudience(resources []string, aud string) bool {
	return slices.ContainsFunc(resources, func(r string) bool {
		r = strings.TrimSuffix(r, "/")
		return aud == r || strings.HasPrefix(aud, r+"/")
	})
}
