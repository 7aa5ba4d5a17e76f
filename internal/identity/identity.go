// Package identity says who a caller is, in the names every other part of
// mcp-operator uses for it: ToolPolicy subjects, approval requesters, audit
// events, sessions. A caller is a ServiceAccount (its token checked by the
// API server), a person or outside client (a token of a configured OAuth
// issuer, its claims mapped to prefixed names), or the anonymous local user.
//
// The package also loads the bridge's authentication configuration, in the
// shape of the Kubernetes API server's AuthenticationConfiguration, and maps
// verified claims to an Identity (Mapper), so that every component that
// signs someone in names them the same way.
//
// An Identity never holds the caller's token: it is logged, audited and
// compared freely.
package identity

import (
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// Kind is what sort of caller an Identity is.
type Kind string

// The kinds of caller.
const (
	// ServiceAccount: a Kubernetes ServiceAccount, authenticated by the
	// API server (TokenReview).
	ServiceAccount Kind = "ServiceAccount"
	// User: a person or client authenticated by an OAuth issuer, with
	// prefixed names; or a user the API server knows that is not a
	// ServiceAccount.
	User Kind = "User"
	// Anonymous: no credentials, accepted only on a loopback development
	// bridge.
	Anonymous Kind = "Anonymous"
)

// Kubernetes' names for ServiceAccounts and the anonymous user.
const (
	serviceAccountUserPrefix = "system:serviceaccount:"
	// SystemPrefix starts every name Kubernetes keeps for itself; a name
	// mapped from an OAuth token never starts with it.
	SystemPrefix      = "system:"
	anonymousUsername = "system:anonymous"
	// AuthenticatedGroup is the group of every authenticated caller.
	AuthenticatedGroup = "system:authenticated"
	anonymousGroup     = "system:unauthenticated"
)

// Identity is an authenticated caller.
type Identity struct {
	Kind Kind
	// Username is the full name: system:serviceaccount:<ns>:<name> for a
	// ServiceAccount, the prefixed claim (oidc:alice@example.com) for a
	// person. Policies, approvals, audit events and sessions use it as is.
	Username string
	// Groups, prefixed like Username for a person.
	Groups []string
	// Issuer is the OAuth issuer URL that vouched for a User from a token;
	// empty for callers the API server authenticated.
	Issuer string
}

// FromUserInfo is the identity the Kubernetes API server reports (a
// TokenReview's user name and groups).
func FromUserInfo(username string, groups []string) Identity {
	kind := User
	if strings.HasPrefix(username, serviceAccountUserPrefix) {
		kind = ServiceAccount
	}
	return Identity{Kind: kind, Username: username, Groups: groups}
}

// AnonymousIdentity is the caller of a development bridge that checks no
// credentials.
func AnonymousIdentity() Identity {
	return Identity{Kind: Anonymous, Username: anonymousUsername, Groups: []string{anonymousGroup}}
}

// Subject is the identity as the permission engine matches it against
// ToolPolicy subjects.
func (id Identity) Subject() policy.Subject {
	if id.Kind == ServiceAccount {
		return policy.SubjectFromUserInfo(id.Username, id.Groups)
	}
	return policy.User(id.Username, id.Groups...)
}
