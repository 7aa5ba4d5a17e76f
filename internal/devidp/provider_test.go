package devidp_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcp-operator/mcp-operator/internal/devidp"
)

// bridgeURL is the bridge's public URL, which the mcp-bridge client serves; bridgeResource its
// MCP endpoint, which people's tokens are for.
const (
	bridgeURL      = "https://bridge.example.test"
	bridgeResource = bridgeURL + "/mcp"
)

func start(t *testing.T) (*devidp.Provider, string) {
	t.Helper()
	p, srv, err := devidp.NewTestServer(devidp.Config{BridgeResources: []string{bridgeURL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// signIn signs user in with the authorization code flow, for the bridge's resource.
func signIn(t *testing.T, issuer string, user devidp.User) *oauth2.Token {
	t.Helper()
	tok, err := devidp.SignIn(context.Background(), issuer, user, bridgeResource)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func getJSON(t *testing.T, u string, into any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}

// verify checks a token's RS256 signature against the provider's published JWKS (fetched now)
// and returns its header key id and claims.
func verify(t *testing.T, issuer, token string) (string, map[string]any) {
	t.Helper()
	kid, claims, err := verifyErr(t, issuer, token)
	if err != nil {
		t.Fatal(err)
	}
	return kid, claims
}

func verifyErr(t *testing.T, issuer, token string) (string, map[string]any, error) {
	t.Helper()
	var jwks jose.JSONWebKeySet
	getJSON(t, issuer+"/keys", &jwks)
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return "", nil, err
	}
	kid := jws.Signatures[0].Header.KeyID
	keys := jwks.Key(kid)
	if len(keys) != 1 {
		return kid, nil, errors.New("key " + kid + " is not in the JWKS")
	}
	payload, err := jws.Verify(keys[0])
	if err != nil {
		return kid, nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return kid, nil, err
	}
	if claims["iss"] != issuer {
		return kid, nil, errors.New("iss is not the issuer")
	}
	return kid, claims, nil
}

func postForm(t *testing.T, u string, form url.Values, user, pass string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestDiscovery(t *testing.T) {
	_, issuer := start(t)
	for _, path := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"} {
		var doc struct {
			Issuer         string   `json:"issuer"`
			JWKS           string   `json:"jwks_uri"`
			Registration   string   `json:"registration_endpoint"`
			CodeChallenge  []string `json:"code_challenge_methods_supported"`
			GrantTypes     []string `json:"grant_types_supported"`
			DeviceEndpoint string   `json:"device_authorization_endpoint"`
		}
		getJSON(t, issuer+path, &doc)
		if doc.Issuer != issuer || doc.JWKS != issuer+"/keys" || doc.Registration != issuer+"/register" || doc.DeviceEndpoint != "" {
			t.Errorf("%s: %+v", path, doc)
		}
		if !slices.Equal(doc.CodeChallenge, []string{"S256"}) {
			t.Errorf("%s: code challenge methods %v, want only S256", path, doc.CodeChallenge)
		}
		for _, g := range []string{"authorization_code", "refresh_token", "client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"} {
			if !slices.Contains(doc.GrantTypes, g) {
				t.Errorf("%s: grant types %v lack %s", path, doc.GrantTypes, g)
			}
		}
	}
}

func TestAuthorizationCodeWithPKCE(t *testing.T) {
	_, issuer := start(t)
	ctx := context.Background()
	tok := signIn(t, issuer, devidp.Alice)
	_, claims := verify(t, issuer, tok.AccessToken)
	if claims["sub"] != "alice@example.com" || claims["email"] != "alice@example.com" || claims["preferred_username"] != "alice" || claims["client_id"] != devidp.MCPClientID {
		t.Errorf("access token claims: %v", claims)
	}
	if !slices.Contains(devidp.Audience(claims), bridgeResource) {
		t.Errorf("access token audience %v lacks the resource", devidp.Audience(claims))
	}
	if groups, _ := claims["groups"].([]any); len(groups) != 1 || groups[0] != "engineering" {
		t.Errorf("groups: %v", claims["groups"])
	}
	if read, err := devidp.Claims(tok.AccessToken); err != nil || read["jti"] != claims["jti"] || read["sub"] != claims["sub"] {
		t.Errorf("Claims read %v, %v; the verified claims are %v", read, err, claims)
	}
	if _, err := devidp.Claims("not-a-jwt"); err == nil {
		t.Error("Claims read something that is not a JWT")
	}
	idToken, _ := tok.Extra("id_token").(string)
	_, idClaims := verify(t, issuer, idToken)
	if !slices.Contains(devidp.Audience(idClaims), devidp.MCPClientID) || idClaims["email"] != "alice@example.com" {
		t.Errorf("ID token claims: %v", idClaims)
	}

	// Bob signs in as himself: another subject, other groups.
	bobTok := signIn(t, issuer, devidp.Bob)
	_, bob := verify(t, issuer, bobTok.AccessToken)
	if bob["sub"] != "bob@example.com" || bob["groups"].([]any)[0] != "sales" {
		t.Errorf("bob's claims: %v", bob)
	}

	wrong := devidp.Alice
	wrong.Password = "not-her-password"
	if _, err := devidp.SignIn(ctx, issuer, wrong); err == nil || !strings.Contains(err.Error(), "wrong username or password") {
		t.Errorf("a wrong password: %v", err)
	}
}

// authorize starts an authorization request by hand and returns where the provider sends the
// browser after signing in as Alice.
func authorize(t *testing.T, issuer string, params url.Values) *url.URL {
	t.Helper()
	q := url.Values{"client_id": {devidp.MCPClientID}, "response_type": {"code"}, "scope": {"openid"},
		"redirect_uri": {devidp.LoopbackRedirectURI}, "state": {"s1"}}
	for k, v := range params {
		q[k] = v
	}
	loc, err := devidp.CompleteLogin(context.Background(), http.DefaultClient, issuer+"/authorize?"+q.Encode(), devidp.Alice)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestPKCEIsRequired(t *testing.T) {
	_, issuer := start(t)
	verifier := oauth2.GenerateVerifier()
	for name, params := range map[string]url.Values{
		"no challenge":    {},
		"plain challenge": {"code_challenge": {verifier}, "code_challenge_method": {"plain"}},
		"method left out": {"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}},
	} {
		loc := authorize(t, issuer, params)
		if loc.Query().Get("error") != "invalid_request" || loc.Query().Get("code") != "" {
			t.Errorf("%s: redirected to %s, want invalid_request and no code", name, loc)
		}
	}

	// A code redeemed with the wrong verifier, or twice, yields nothing.
	loc := authorize(t, issuer, url.Values{"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}})
	code := loc.Query().Get("code")
	redeem := func(v string) int {
		status, _ := postForm(t, issuer+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"redirect_uri": {devidp.LoopbackRedirectURI}, "client_id": {devidp.MCPClientID}, "code_verifier": {v}}, "", "")
		return status
	}
	if status := redeem(oauth2.GenerateVerifier()); status != http.StatusBadRequest {
		t.Errorf("wrong verifier: %d", status)
	}
	if status := redeem(verifier); status != http.StatusOK {
		t.Errorf("right verifier: %d", status)
	}
	if status := redeem(verifier); status != http.StatusBadRequest {
		t.Errorf("the same code again: %d", status)
	}
}

func TestAuthorizationWithoutScope(t *testing.T) {
	_, issuer := start(t)
	verifier := oauth2.GenerateVerifier()
	loc := authorize(t, issuer, url.Values{"scope": {""}, "code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}})
	if loc.Query().Get("code") == "" {
		t.Errorf("an authorization request without scope: redirected to %s", loc)
	}
}

func TestInvalidResourceIsRefused(t *testing.T) {
	_, issuer := start(t)
	for _, res := range []string{"not-a-uri", "https://bridge.example.test/mcp#fragment"} {
		status, body := postForm(t, issuer+"/oauth/token", url.Values{"grant_type": {"client_credentials"}, "resource": {res}}, devidp.AgentClientID, devidp.AgentSecret)
		if status != http.StatusBadRequest || body["error"] != "invalid_target" {
			t.Errorf("resource %q: %d %v", res, status, body)
		}
	}
}

func TestRefreshTokensRotate(t *testing.T) {
	_, issuer := start(t)
	ctx := context.Background()
	conf := oauth2.Config{ClientID: devidp.MCPClientID, RedirectURL: devidp.LoopbackRedirectURI, Scopes: []string{"openid", "offline_access"},
		Endpoint: oauth2.Endpoint{AuthURL: issuer + "/authorize", TokenURL: issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	loc, err := devidp.CompleteLogin(ctx, http.DefaultClient, conf.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", bridgeResource)), devidp.Alice)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token for offline_access")
	}
	refresh := func(rt string) (int, map[string]any) {
		return postForm(t, issuer+"/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {devidp.MCPClientID}}, "", "")
	}
	status, body := refresh(tok.RefreshToken)
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, body)
	}
	_, claims := verify(t, issuer, body["access_token"].(string))
	if claims["sub"] != "alice@example.com" || !slices.Contains(devidp.Audience(claims), bridgeResource) {
		t.Errorf("refreshed token: %v", claims)
	}
	if status, _ := refresh(tok.RefreshToken); status != http.StatusBadRequest {
		t.Errorf("a used refresh token works again: %d", status)
	}
}

func TestClientCredentials(t *testing.T) {
	_, issuer := start(t)
	conf := clientcredentials.Config{ClientID: devidp.AgentClientID, ClientSecret: devidp.AgentSecret, TokenURL: issuer + "/oauth/token",
		EndpointParams: url.Values{"resource": {bridgeResource}}}
	tok, err := conf.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, claims := verify(t, issuer, tok.AccessToken)
	if claims["sub"] != devidp.AgentClientID || claims["preferred_username"] != devidp.AgentClientID || !slices.Contains(devidp.Audience(claims), bridgeResource) {
		t.Errorf("agent token: %v", claims)
	}
	conf.ClientSecret = "wrong"
	if _, err := conf.Token(context.Background()); err == nil {
		t.Error("a wrong client secret got a token")
	}
	// A public client has no credentials to present.
	status, _ := postForm(t, issuer+"/oauth/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {devidp.MCPClientID}}, "", "")
	if status == http.StatusOK {
		t.Error("the public client got a client credentials token")
	}
}

func exchange(t *testing.T, issuer string, form url.Values, client, secret string) (int, map[string]any) {
	t.Helper()
	base := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}}
	for k, v := range form {
		base[k] = v
	}
	return postForm(t, issuer+"/oauth/token", base, client, secret)
}

func TestTokenExchange(t *testing.T) {
	p, issuer := start(t)
	const upstream = "https://upstream.example.test/mcp"
	alice := signIn(t, issuer, devidp.Alice)
	status, body := exchange(t, issuer, url.Values{"subject_token": {alice.AccessToken}, "resource": {upstream}, "scope": {"repo"}}, devidp.BridgeClientID, devidp.BridgeSecret)
	if status != http.StatusOK {
		t.Fatalf("exchange: %d %v", status, body)
	}
	exchanged := body["access_token"].(string)
	if exchanged == alice.AccessToken || body["issued_token_type"] != "urn:ietf:params:oauth:token-type:access_token" {
		t.Errorf("exchange answer: %v", body)
	}
	_, claims := verify(t, issuer, exchanged)
	act, _ := claims["act"].(map[string]any)
	if claims["sub"] != "alice@example.com" || claims["email"] != "alice@example.com" || act["sub"] != devidp.BridgeClientID ||
		!slices.Contains(devidp.Audience(claims), upstream) || slices.Contains(devidp.Audience(claims), bridgeResource) {
		t.Errorf("exchanged token claims: %v", claims)
	}

	// client_secret_post works too.
	if status, body := exchange(t, issuer, url.Values{"subject_token": {alice.AccessToken}, "audience": {upstream},
		"client_id": {devidp.BridgeClientID}, "client_secret": {devidp.BridgeSecret}}, "", ""); status != http.StatusOK {
		t.Errorf("client_secret_post: %d %v", status, body)
	}

	for name, c := range map[string]struct {
		form           url.Values
		client, secret string
		wantError      string
	}{
		"wrong secret":             {url.Values{"subject_token": {alice.AccessToken}, "resource": {upstream}}, devidp.BridgeClientID, "nope", "invalid_client"},
		"client without the grant": {url.Values{"subject_token": {alice.AccessToken}, "resource": {upstream}}, devidp.ConsoleClientID, devidp.ConsoleSecret, "unauthorized_client"},
		"no audience":              {url.Values{"subject_token": {alice.AccessToken}}, devidp.BridgeClientID, devidp.BridgeSecret, "invalid_target"},
		"made-up subject token":    {url.Values{"subject_token": {"eyJhbGciOiJub25lIn0.e30."}, "resource": {upstream}}, devidp.BridgeClientID, devidp.BridgeSecret, "invalid_request"},
	} {
		status, body := exchange(t, issuer, c.form, c.client, c.secret)
		if status == http.StatusOK || body["error"] != c.wantError {
			t.Errorf("%s: %d %v, want %s", name, status, body, c.wantError)
		}
	}

	// The bridge may exchange only tokens issued for it (or for its endpoints), not one a person
	// got for another resource server.
	other, err := devidp.SignIn(context.Background(), issuer, devidp.Alice, "https://other.example.test/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if status, body := exchange(t, issuer, url.Values{"subject_token": {other.AccessToken}, "resource": {upstream}}, devidp.BridgeClientID, devidp.BridgeSecret); status == http.StatusOK || body["error"] != "invalid_grant" {
		t.Errorf("a subject token for another resource: %d %v, want invalid_grant", status, body)
	}
	beneath, err := devidp.SignIn(context.Background(), issuer, devidp.Alice, bridgeURL+"/servers/x/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if status, body := exchange(t, issuer, url.Values{"subject_token": {beneath.AccessToken}, "resource": {upstream}}, devidp.BridgeClientID, devidp.BridgeSecret); status != http.StatusOK {
		t.Errorf("a subject token for an endpoint beneath the bridge's resource: %d %v", status, body)
	}

	// A subject token withdrawn at the provider cannot be exchanged any more.
	_, aliceClaims := verify(t, issuer, alice.AccessToken)
	if err := p.RevokeAccessToken(aliceClaims["jti"].(string)); err != nil {
		t.Fatal(err)
	}
	if status, body := exchange(t, issuer, url.Values{"subject_token": {alice.AccessToken}, "resource": {upstream}}, devidp.BridgeClientID, devidp.BridgeSecret); body["error"] != "invalid_grant" {
		t.Errorf("revoked subject token: %d %v", status, body)
	}
}

func TestKeyRotation(t *testing.T) {
	p, issuer := start(t)
	before := signIn(t, issuer, devidp.Alice)
	oldKid, _ := verify(t, issuer, before.AccessToken)
	newKid, err := p.RotateKey()
	if err != nil {
		t.Fatal(err)
	}
	after := signIn(t, issuer, devidp.Alice)
	if kid, _ := verify(t, issuer, after.AccessToken); kid != newKid || kid == oldKid {
		t.Errorf("after rotation the token is signed by %s, want %s", kid, newKid)
	}
	verify(t, issuer, before.AccessToken) // the old key is still published
	if err := p.RemoveKey(newKid); err == nil {
		t.Error("the key signing now was removed")
	}
	if err := p.RemoveKey(oldKid); err != nil {
		t.Fatal(err)
	}
	if _, _, err := verifyErr(t, issuer, before.AccessToken); err == nil {
		t.Error("a token signed by a removed key still verifies")
	}
	if ids := p.KeyIDs(); !slices.Equal(ids, []string{newKid}) {
		t.Errorf("published keys %v", ids)
	}
}

func TestDynamicRegistration(t *testing.T) {
	_, issuer := start(t)
	register := func(doc string) (int, map[string]any) {
		resp, err := http.Post(issuer+"/register", "application/json", strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	for _, refused := range []string{`["https://evil.example/cb"]`, `["http://evil.example/cb"]`, `["javascript:alert(1)"]`,
		`["http://127.0.0.1:*/**"]`, `["http://localhost/cb#frag"]`, `[]`} {
		if status, body := register(`{"redirect_uris":` + refused + `}`); status != http.StatusBadRequest || body["error"] != "invalid_redirect_uri" {
			t.Errorf("redirects %s: %d %v, want invalid_redirect_uri", refused, status, body)
		}
	}
	// A client naming a web redirect beside its loopback one (as VS Code does) gets the
	// loopback one registered, and the answer says so.
	status, body := register(`{"redirect_uris":["https://vscode.dev/redirect","http://127.0.0.1:33418/"]}`)
	if got, _ := body["redirect_uris"].([]any); status != http.StatusCreated || len(got) != 1 || got[0] != "http://127.0.0.1:33418/" {
		t.Errorf("a web and a loopback redirect: %d %v, want the loopback one registered", status, body)
	}
	// A private-use scheme (Cursor's) is a native app's own redirect (RFC 8252 section 7.1).
	const cursor = "cursor://anysphere.cursor-retrieval/oauth/user-mcp/callback"
	status, body = register(`{"redirect_uris":["` + cursor + `"]}`)
	if status != http.StatusCreated {
		t.Fatalf("a private-use scheme: %d %v", status, body)
	}
	cq := url.Values{"client_id": {body["client_id"].(string)}, "response_type": {"code"}, "scope": {"openid"}, "state": {"s"},
		"redirect_uri": {cursor}, "code_challenge": {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())}, "code_challenge_method": {"S256"}}
	if loc, err := devidp.CompleteLogin(context.Background(), http.DefaultClient, issuer+"/authorize?"+cq.Encode(), devidp.Bob); err != nil ||
		loc.Scheme != "cursor" || loc.Query().Get("code") == "" {
		t.Errorf("the private-use redirect: %v %v", loc, err)
	}
	if status, body := register(`not json`); status != http.StatusBadRequest || body["error"] != "invalid_client_metadata" {
		t.Errorf("not JSON: %d %v", status, body)
	}
	status, body = register(`{"redirect_uris":["http://localhost:7777/oauth/callback"],"client_name":"desktop","token_endpoint_auth_method":"none"}`)
	if status != http.StatusCreated {
		t.Fatalf("register: %d %v", status, body)
	}
	id := body["client_id"].(string)
	verifier := oauth2.GenerateVerifier()
	q := url.Values{"client_id": {id}, "response_type": {"code"}, "scope": {"openid"}, "state": {"s"},
		"redirect_uri": {"http://localhost:7777/oauth/callback"}, "code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}
	loc, err := devidp.CompleteLogin(context.Background(), http.DefaultClient, issuer+"/authorize?"+q.Encode(), devidp.Bob)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Host != "localhost:7777" || loc.Query().Get("code") == "" {
		t.Errorf("registered client's redirect: %s", loc)
	}
}

// The registered redirect's port may change from one request to the next (a desktop client
// picks a free one), its path may not (RFC 8252 section 7.3).
func TestLoopbackRedirectsVaryOnlyThePort(t *testing.T) {
	_, issuer := start(t)
	challenge := url.Values{"code_challenge": {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())}, "code_challenge_method": {"S256"}}
	// The public client (native) and the confidential one (web) alike.
	for _, client := range []string{devidp.MCPClientID, devidp.ConsoleClientID} {
		for redirect, allowed := range map[string]bool{
			"http://127.0.0.1:5555/callback":       true,
			"http://localhost:6274/oauth/callback": true,
			"http://[::1]:80/callback":             true,
			"http://127.0.0.1/callback":            true,
			"http://127.0.0.1:5555/elsewhere":      false,
			"http://127.0.0.1:5555/callback/x":     false,
			"http://127.0.0.1:5555/callback?x=1":   false,
		} {
			q := url.Values{"client_id": {client}, "response_type": {"code"}, "scope": {"openid"}, "redirect_uri": {redirect}, "state": {"s"}}
			maps.Copy(q, challenge)
			loc, err := devidp.CompleteLogin(context.Background(), http.DefaultClient, issuer+"/authorize?"+q.Encode(), devidp.Alice)
			if got := err == nil && loc.Query().Get("code") != ""; got != allowed {
				t.Errorf("%s, %s: redirected to %v (%v), want allowed=%v", client, redirect, loc, err, allowed)
			}
		}
	}
}
