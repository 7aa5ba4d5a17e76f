package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
)

// introspection is how an issuer is asked about opaque tokens (RFC 7662).
type introspection struct {
	url      string // "" until read from the discovery document
	clientID string
	secret   string
}

func newIntrospection(in *identity.Introspection) (*introspection, error) {
	secret, err := os.ReadFile(in.ClientSecretFile)
	if err != nil {
		return nil, fmt.Errorf("while reading the introspection client secret: %w", err)
	}
	return &introspection{url: in.URL, clientID: in.ClientID, secret: strings.TrimSpace(string(secret))}, nil
}

// introspect asks the issuer about an opaque token. An active token is
// checked as a JWT would be (issuer, audience, expiry) and its claims
// mapped the same way.
func (iss *issuer) introspect(ctx context.Context, token string, now time.Time) (verified, error) {
	endpoint := iss.introspection.url
	if endpoint == "" {
		meta, err := iss.metadata(ctx)
		if err != nil {
			return verified{}, err
		}
		if endpoint = meta.IntrospectionEndpoint; endpoint == "" {
			return verified{}, fmt.Errorf("issuer %s's discovery document has no introspection_endpoint", iss.url)
		}
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return verified{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(iss.introspection.clientID), url.QueryEscape(iss.introspection.secret))
	resp, err := iss.client.Do(req)
	if err != nil {
		return verified{}, fmt.Errorf("while introspecting a token at %s: %w", endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var claims map[string]any
	if err := decodeAnswer(resp, endpoint, &claims); err != nil {
		return verified{}, fmt.Errorf("while introspecting a token: %w", err)
	}
	return iss.checkIntrospected(claims, now)
}

// checkIntrospected applies to an introspection answer the checks a JWT's
// claims get. aud and exp are required: a token for no named resource, or
// one that never expires, is not accepted.
func (iss *issuer) checkIntrospected(claims map[string]any, now time.Time) (verified, error) {
	if claims["active"] != true {
		return verified{}, refused("the issuer says the token is not active")
	}
	if s, ok := claims["iss"].(string); ok && s != iss.url {
		return verified{}, refused("the introspected token's issuer %q is not %q", s, iss.url)
	}
	var aud []string
	switch v := claims["aud"].(type) {
	case string:
		aud = []string{v}
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				aud = append(aud, s)
			}
		}
	}
	if !iss.audienceOK(aud) {
		return verified{}, refused("the token's audience %q does not name this bridge (%s)", aud, iss.resource.URL)
	}
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return verified{}, refused("the introspection answer has no exp")
	}
	if !now.Before(exp.Add(iss.leeway)) {
		return verified{}, refused("the token is expired")
	}
	if nbf, ok := numericDate(claims["nbf"]); ok && now.Add(iss.leeway).Before(nbf) {
		return verified{}, refused("the token is not valid yet")
	}
	id, err := iss.mapper.Identity(claims)
	if err != nil {
		return verified{}, fmt.Errorf("%w: %w", authn.ErrUnauthenticated, err)
	}
	return verified{id: id, expires: exp, scopes: scopesOf(claims)}, nil
}

func numericDate(v any) (time.Time, bool) {
	switch n := v.(type) {
	case float64:
		return time.Unix(int64(n), 0), true
	case json.Number:
		f, err := n.Float64()
		return time.Unix(int64(f), 0), err == nil
	}
	return time.Time{}, false
}
