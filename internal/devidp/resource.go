package devidp

import (
	"context"
	"net/http"
	"net/url"
	"slices"

	httphelper "github.com/zitadel/oidc/v3/pkg/http"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// The op package does not read RFC 8707 `resource` parameters on /authorize or on the client
// credentials grant (and on token exchange it issues the token for `audience` only). This
// middleware reads them before op does, checks they are absolute URIs without a fragment,
// and hands them on:
//   - in the request context, where CreateAuthRequest and ClientCredentialsTokenRequest read
//     them as the access token's audience;
//   - for token exchange, appended to `audience`, which op turns into the token's `aud`.
//
// It also accepts client_secret_post on token exchange, which op reads from Basic auth only, and
// an authorization request without a scope.

type resourcesKey struct{}

func resourcesFrom(ctx context.Context) []string {
	r, _ := ctx.Value(resourcesKey{}).([]string)
	return r
}

func errInvalidTarget(description string) *oidc.Error {
	return &oidc.Error{ErrorType: "invalid_target", Description: description}
}

func resourceIndicators(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			next.ServeHTTP(w, r) // op answers a form it cannot parse
			return
		}
		resources := r.Form["resource"]
		for _, res := range resources {
			if u, err := url.Parse(res); err != nil || !u.IsAbs() || u.Fragment != "" {
				// Answered here rather than at the client's redirect_uri: that is not yet checked.
				httphelper.MarshalJSONWithStatus(w, errInvalidTarget("resource must be an absolute URI without a fragment"), http.StatusBadRequest)
				return
			}
		}
		// OAuth 2.1 makes scope optional and MCP clients may send none, but op
		// refuses an authorization request without one: none means openid.
		if r.URL.Path == authorizePath && r.Form.Get("scope") == "" {
			r.Form.Set("scope", oidc.ScopeOpenID)
		}
		if r.Form.Get("grant_type") == string(oidc.GrantTypeTokenExchange) {
			for _, res := range resources {
				if !slices.Contains(r.Form["audience"], res) {
					r.Form.Add("audience", res)
				}
			}
			if id, secret := r.Form.Get("client_id"), r.Form.Get("client_secret"); r.Header.Get("Authorization") == "" && id != "" && secret != "" {
				r.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), resourcesKey{}, resources)))
	})
}
