package devidp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"

	"golang.org/x/oauth2"
)

// LoopbackRedirectURI is the redirect URI SignIn registers for. Nothing needs to listen there:
// SignIn stops at the redirect and reads the code from it.
const LoopbackRedirectURI = "http://127.0.0.1:1/callback"

// SignIn runs the authorization code flow with PKCE as the public client mcp-client, signing in
// as user on the login page (a plain HTML form), as a desktop MCP client and its person would, and
// returns the tokens. resources become the access token's audience (RFC 8707).
func SignIn(ctx context.Context, issuer string, user User, resources ...string) (*oauth2.Token, error) {
	conf := oauth2.Config{
		ClientID:    MCPClientID,
		Endpoint:    oauth2.Endpoint{AuthURL: issuer + "/authorize", TokenURL: issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: LoopbackRedirectURI,
		Scopes:      []string{"openid", "profile", "email"},
	}
	verifier := oauth2.GenerateVerifier()
	state := randomHex()
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	for _, r := range resources {
		opts = append(opts, oauth2.SetAuthURLParam("resource", r))
	}
	redirect, err := CompleteLogin(ctx, http.DefaultClient, conf.AuthCodeURL(state, opts...), user)
	if err != nil {
		return nil, err
	}
	q := redirect.Query()
	if e := q.Get("error"); e != "" {
		return nil, fmt.Errorf("authorization refused: %s: %s", e, q.Get("error_description"))
	}
	if q.Get("state") != state {
		return nil, fmt.Errorf("the redirect's state %q is not the one sent", q.Get("state"))
	}
	return conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
}

// CompleteLogin follows an authorization URL to the login page, signs in as user, and returns the
// URL the provider then redirects to: the client's redirect URI with the code (or an error).
// The client's transport is used; cookies live for this one sign-in.
func CompleteLogin(ctx context.Context, client *http.Client, authURL string, user User) (*url.URL, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Transport: client.Transport, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	start, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	next, form := start, url.Values(nil)
	for range 10 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next.String(), nil)
		if form != nil {
			req, err = http.NewRequestWithContext(ctx, http.MethodPost, next.String(), strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if err != nil {
			return nil, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := resp.Location()
			if err != nil {
				return nil, err
			}
			if loc.Host != start.Host {
				return loc, nil // left the provider: this is the client's redirect URI
			}
			next, form = loc, nil
		case resp.StatusCode == http.StatusOK && next.Path == loginPath && form == nil:
			form = url.Values{"authRequestID": {next.Query().Get("authRequestID")}, "username": {user.Username}, "password": {user.Password}}
		case resp.StatusCode == http.StatusUnauthorized && form != nil:
			return nil, fmt.Errorf("signing in as %s: %w", user.Username, errBadCredentials)
		default:
			return nil, fmt.Errorf("%s %s: %s: %s", req.Method, next.Redacted(), resp.Status, strings.TrimSpace(string(body)))
		}
	}
	return nil, fmt.Errorf("too many redirects from %s", authURL)
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
