package mcpbridge

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth"
)

// authenticate checks the bearer token within RequestReadTimeout (an API
// server or issuer that does not answer must not hold the request
// forever). It is the one place callers are authenticated: ServiceAccount
// tokens and, when OAuth is configured, issuers' access tokens alike
// (cfg.Auth routes them).
func (b *Bridge) authenticate(w http.ResponseWriter, r *http.Request) (identity.Identity, bool) {
	if tokenInQuery(r) {
		// RFC 6750 allows a query parameter, OAuth 2.1 and the MCP
		// authorization spec do not: URLs end up in logs and Referer
		// headers. Refused even when the header carries a token too.
		b.challenge(w, r, http.StatusBadRequest, "invalid_request", "a bearer token is accepted in the Authorization header only, never in the URL")
		return identity.Identity{}, false
	}
	token := authn.BearerToken(r.Header.Get("Authorization"))
	if c, ok := b.cfg.Auth.(authn.Cached); ok {
		// Most requests: a token checked a moment ago, no wait to bound.
		if id, ok := c.Cached(token); ok {
			return id, true
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), b.cfg.RequestReadTimeout)
	defer cancel()
	id, err := b.cfg.Auth.Authenticate(ctx, token)
	if err == nil {
		return id, true
	}
	switch {
	case errors.Is(err, authn.ErrInsufficientScope):
		b.cfg.Log.V(1).Info("a bearer token was refused", "why", err.Error(), "remote", r.RemoteAddr)
		b.challenge(w, r, http.StatusForbidden, "insufficient_scope", "the token lacks a scope the bridge requires")
		return id, false
	case errors.Is(err, authn.ErrUnauthenticated):
		// Why, for whoever debugs a client's sign-in (the reason never
		// holds the token; a refusal by TokenReview says no more).
		b.cfg.Log.V(1).Info("a bearer token was refused", "why", err.Error(), "remote", r.RemoteAddr)
		code := "invalid_token"
		if token == "" {
			code = "" // RFC 6750: no error code when no credentials were sent
		}
		b.challenge(w, r, http.StatusUnauthorized, code, "")
		return id, false
	case errors.Is(err, authn.ErrBusy):
		overLimit(w, http.StatusServiceUnavailable, nil, "the bridge is checking its limit of new tokens at once")
		return id, false
	case errors.Is(err, authn.ErrTryLater):
		// Not the token's fault, nor an outage: the issuer's keys are
		// read again in a moment (debug level: a flood of made-up key
		// ids would fill the log).
		b.cfg.Log.V(1).Info("a bearer token could not be checked yet", "why", err.Error(), "remote", r.RemoteAddr)
		var later *authn.TryLater
		wait := time.Second
		if errors.As(err, &later) {
			wait = max(wait, later.After)
		}
		tryLater(w, http.StatusServiceUnavailable, nil, reasonAuthUnavailable, wait, "the bridge cannot check the token yet: it names a signing key the issuer had not published when the bridge last read its keys")
		return id, false
	}
	if r.Context().Err() != nil {
		return id, false // the caller left while its token was being checked
	}
	b.cfg.Log.Error(err, "authentication failed")
	tryLater(w, http.StatusServiceUnavailable, nil, reasonAuthUnavailable, overLimitRetry, "the bridge could not check the token: the API server or the token's issuer did not answer")
	return id, false
}

// tokenInQuery says whether the request carries an access_token query
// parameter, however its name is escaped (access%5Ftoken is the same).
func tokenInQuery(r *http.Request) bool {
	return r.URL.RawQuery != "" && r.URL.Query().Has("access_token")
}

// challenge refuses a request for its credentials: status with a JSON-RPC
// error and, when the bridge is an OAuth resource, the WWW-Authenticate
// header that says where its metadata is and what scopes to ask for
// (RFC 6750, RFC 9728); errCode is RFC 6750's error ("" for none).
func (b *Bridge) challenge(w http.ResponseWriter, r *http.Request, status int, errCode, message string) {
	if res := b.cfg.OAuth; res != nil {
		w.Header().Set("WWW-Authenticate", res.Challenge(oauth.ResourcePath(r.URL.Path), errCode, message))
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-operator"`)
	}
	if message == "" {
		message = "a valid bearer token with audience " + authn.Audience + " is required"
		if b.cfg.OAuth != nil {
			message = "a valid bearer token is required: a ServiceAccount token with audience " + authn.Audience +
				", or an access token for " + b.cfg.OAuth.URL + " (see " + b.cfg.OAuth.MetadataURL(oauth.ResourcePath(r.URL.Path)) + ")"
		}
	}
	writeError(w, status, nil, jsonrpc.CodeInvalidRequest, message)
}
