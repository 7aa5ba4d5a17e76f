package identity

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// The API versions of AuthenticationConfiguration the loader reads: the
// Kubernetes API server's structured authentication configuration, of
// which the bridge takes the jwt part.
const (
	APIGroup = "apiserver.config.k8s.io"
	kindName = "AuthenticationConfiguration"
)

var apiVersions = []string{APIGroup + "/v1", APIGroup + "/v1beta1"}

// DefaultPrefix is what the --oidc-issuer-url shortcut puts before the
// username and the groups of its issuer's callers.
const DefaultPrefix = "oidc:"

// DefaultUsernameClaim is the shortcut's username claim: sub, the one
// claim every access token carries (RFC 9068) and that an issuer never
// gives to two people. email is friendlier but often absent from access
// tokens and, unverified, names nobody for sure; a configuration file can
// map it (or any claim, or a CEL expression).
const DefaultUsernameClaim = "sub"

// DefaultGroupsClaim is the shortcut's groups claim.
const DefaultGroupsClaim = "groups"

// Config is an AuthenticationConfiguration: the OAuth issuers whose tokens
// the bridge accepts, beside ServiceAccount tokens.
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// JWT lists the issuers, each with its own claim mappings.
	JWT []JWTAuthenticator `json:"jwt"`
}

// JWTAuthenticator is one issuer and how its tokens' claims become an
// Identity.
type JWTAuthenticator struct {
	Issuer               Issuer                `json:"issuer"`
	ClaimValidationRules []ClaimValidationRule `json:"claimValidationRules,omitempty"`
	ClaimMappings        ClaimMappings         `json:"claimMappings"`
}

// Issuer is where tokens come from and whom they must be for.
type Issuer struct {
	// URL is the issuer exactly as tokens' iss claim says it (https).
	URL string `json:"url"`
	// DiscoveryURL, when set, is where the discovery document is read
	// instead of URL + /.well-known/openid-configuration (the issuer in it
	// must still be URL).
	DiscoveryURL string `json:"discoveryURL,omitempty"`
	// CertificateAuthority is PEM: the CAs that sign the issuer's serving
	// certificate, when the system's do not.
	CertificateAuthority string `json:"certificateAuthority,omitempty"`
	// Audiences a token may carry besides the bridge's own resource URL
	// (for issuers that cannot put the resource into aud, such as an
	// audience named after the client).
	Audiences []string `json:"audiences,omitempty"`
	// AudienceMatchPolicy: MatchAny (the only one; a token must name at
	// least one accepted audience).
	AudienceMatchPolicy string `json:"audienceMatchPolicy,omitempty"`
	// Introspection, when set, sends the tokens that are not JWTs to this
	// issuer's RFC 7662 introspection endpoint (an mcp-operator addition
	// to the Kubernetes shape).
	Introspection *Introspection `json:"introspection,omitempty"`
}

// Introspection is how the bridge asks an issuer about an opaque token.
type Introspection struct {
	// URL of the endpoint; empty: the discovery document's
	// introspection_endpoint.
	URL string `json:"url,omitempty"`
	// ClientID and the file holding the client secret the bridge
	// authenticates with (HTTP Basic).
	ClientID         string `json:"clientID"`
	ClientSecretFile string `json:"clientSecretFile"`
}

// ClaimValidationRule is a condition every accepted token meets: a claim
// with a required value, or a CEL expression over claims that is true.
type ClaimValidationRule struct {
	Claim         string `json:"claim,omitempty"`
	RequiredValue string `json:"requiredValue,omitempty"`
	Expression    string `json:"expression,omitempty"`
	// Message is the reason given when the rule fails.
	Message string `json:"message,omitempty"`
}

// ClaimMappings say which claims are the username and the groups.
type ClaimMappings struct {
	Username PrefixedClaimOrExpression `json:"username"`
	Groups   PrefixedClaimOrExpression `json:"groups,omitempty"`
}

// PrefixedClaimOrExpression is a claim with a prefix, or a CEL expression
// over claims whose result is used as is.
type PrefixedClaimOrExpression struct {
	Claim      string `json:"claim,omitempty"`
	Prefix     string `json:"prefix,omitempty"`
	Expression string `json:"expression,omitempty"`
}

// Option changes how a configuration is checked.
type Option func(*options)

type options struct{ insecureIssuers bool }

// AllowInsecureIssuers accepts http:// issuers on other hosts than
// loopback: for a development cluster only, as tokens and keys then cross
// the network in clear text.
func AllowInsecureIssuers() Option { return func(o *options) { o.insecureIssuers = true } }

// LoadAuthenticationConfig reads and checks the AuthenticationConfiguration
// file at path (YAML or JSON).
func LoadAuthenticationConfig(path string, opts ...Option) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("while reading the authentication configuration: %w", err)
	}
	c, err := ParseAuthenticationConfig(data, opts...)
	if err != nil {
		return nil, fmt.Errorf("authentication configuration %s: %w", path, err)
	}
	return c, nil
}

// ParseAuthenticationConfig decodes and checks an AuthenticationConfiguration.
// Unknown fields are errors: a misspelled field would otherwise be a rule
// silently not applied.
func ParseAuthenticationConfig(data []byte, opts ...Option) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("not a valid AuthenticationConfiguration: %w", err)
	}
	if err := c.Validate(opts...); err != nil {
		return nil, err
	}
	return &c, nil
}

// IssuerConfig is the configuration of the --oidc-issuer-url shortcut: one
// issuer, username from sub and groups from groups, both prefixed oidc:.
func IssuerConfig(issuerURL string, opts ...Option) (*Config, error) {
	c := &Config{APIVersion: apiVersions[0], Kind: kindName, JWT: []JWTAuthenticator{{
		Issuer: Issuer{URL: issuerURL},
		ClaimMappings: ClaimMappings{
			Username: PrefixedClaimOrExpression{Claim: DefaultUsernameClaim, Prefix: DefaultPrefix},
			Groups:   PrefixedClaimOrExpression{Claim: DefaultGroupsClaim, Prefix: DefaultPrefix},
		},
	}}}
	if err := c.Validate(opts...); err != nil {
		return nil, fmt.Errorf("--oidc-issuer-url: %w", err)
	}
	return c, nil
}

// Validate says everything wrong with c, each with what to fix.
func (c *Config) Validate(opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var errs []error
	if c.Kind != kindName {
		errs = append(errs, fmt.Errorf("kind must be %s, not %q", kindName, c.Kind))
	}
	if !slices.Contains(apiVersions, c.APIVersion) {
		errs = append(errs, fmt.Errorf("apiVersion must be one of %s, not %q", strings.Join(apiVersions, ", "), c.APIVersion))
	}
	if len(c.JWT) == 0 {
		errs = append(errs, errors.New("jwt lists no issuer: name at least one (jwt[].issuer.url)"))
	}
	issuers := map[string]int{}
	prefixes := map[string]int{}
	for i := range c.JWT {
		j := &c.JWT[i]
		field := fmt.Sprintf("jwt[%d]", i)
		if err := j.validate(o); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
		if first, ok := issuers[j.Issuer.URL]; ok && j.Issuer.URL != "" {
			errs = append(errs, fmt.Errorf("%s.issuer.url %q is also jwt[%d]'s: each issuer is configured once", field, j.Issuer.URL, first))
		} else {
			issuers[j.Issuer.URL] = i
		}
		if p := j.ClaimMappings.Username.Prefix; p != "" {
			if first, ok := prefixes[p]; ok {
				errs = append(errs, fmt.Errorf("%s.claimMappings.username.prefix %q is also jwt[%d]'s: give each issuer its own prefix, or a person of one could be taken for a person of the other", field, p, first))
			} else {
				prefixes[p] = i
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// The CEL expressions compile last: a compile error is clearest alone.
	for i := range c.JWT {
		if _, err := NewMapper(c.JWT[i]); err != nil {
			errs = append(errs, fmt.Errorf("jwt[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func (j *JWTAuthenticator) validate(o options) error {
	var errs []error
	if err := validateIssuerURL("issuer.url", j.Issuer.URL, o); err != nil {
		errs = append(errs, err)
	}
	if j.Issuer.DiscoveryURL != "" {
		if err := validateIssuerURL("issuer.discoveryURL", j.Issuer.DiscoveryURL, o); err != nil {
			errs = append(errs, err)
		}
	}
	if ca := j.Issuer.CertificateAuthority; ca != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(ca)) {
		errs = append(errs, errors.New("issuer.certificateAuthority holds no PEM certificate"))
	}
	if p := j.Issuer.AudienceMatchPolicy; p != "" && p != "MatchAny" {
		errs = append(errs, fmt.Errorf("issuer.audienceMatchPolicy must be MatchAny (or left out), not %q", p))
	}
	for k, a := range j.Issuer.Audiences {
		if a == "" {
			errs = append(errs, fmt.Errorf("issuer.audiences[%d] is empty", k))
		}
	}
	if in := j.Issuer.Introspection; in != nil {
		if in.URL != "" {
			if err := validateIssuerURL("issuer.introspection.url", in.URL, o); err != nil {
				errs = append(errs, err)
			}
		}
		if in.ClientID == "" || in.ClientSecretFile == "" {
			errs = append(errs, errors.New("issuer.introspection needs clientID and clientSecretFile (the bridge's client at the issuer)"))
		}
	}
	for k, r := range j.ClaimValidationRules {
		switch {
		case r.Expression != "" && (r.Claim != "" || r.RequiredValue != ""):
			errs = append(errs, fmt.Errorf("claimValidationRules[%d]: give an expression or a claim with its requiredValue, not both", k))
		case r.Expression == "" && r.Claim == "":
			errs = append(errs, fmt.Errorf("claimValidationRules[%d]: give an expression, or a claim with its requiredValue", k))
		}
	}
	errs = append(errs, j.ClaimMappings.Username.validate("claimMappings.username", true)...)
	errs = append(errs, j.ClaimMappings.Groups.validate("claimMappings.groups", false)...)
	return errors.Join(errs...)
}

// validate checks one mapping. The prefix is what keeps a person's names
// apart from the names Kubernetes keeps (system:serviceaccount:...) and
// from another issuer's people, hence required.
func (m PrefixedClaimOrExpression) validate(field string, required bool) []error {
	switch {
	case m.Claim == "" && m.Expression == "":
		if required {
			return []error{fmt.Errorf("%s needs a claim (with a prefix) or an expression", field)}
		}
		if m.Prefix != "" {
			return []error{fmt.Errorf("%s.prefix is set but no claim is", field)}
		}
		return nil
	case m.Claim != "" && m.Expression != "":
		return []error{fmt.Errorf("%s: give a claim or an expression, not both", field)}
	case m.Expression != "":
		if m.Prefix != "" {
			return []error{fmt.Errorf("%s.prefix goes with a claim; an expression builds the whole name (put the prefix in it)", field)}
		}
		return nil
	case m.Prefix == "":
		return []error{fmt.Errorf("%s.prefix is empty: set one (such as %q) so that a token's %s claim can never be taken for a Kubernetes name (system:...) or another issuer's", field, DefaultPrefix, m.Claim)}
	case strings.HasPrefix(m.Prefix, SystemPrefix):
		return []error{fmt.Errorf("%s.prefix %q starts with %s, which Kubernetes keeps for its own names: choose another", field, m.Prefix, SystemPrefix)}
	}
	return nil
}

// validateIssuerURL: https, or http on loopback (a development issuer on
// this machine) or when insecure issuers are allowed; no query, no
// fragment, no user info.
func validateIssuerURL(field, raw string, o options) error {
	if raw == "" {
		return fmt.Errorf("%s is required: the issuer exactly as its tokens' iss claim says it (https://...)", field)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s %q is not an absolute URL", field, raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%s %q must have no query, fragment or user info", field, raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if IsLoopbackHost(u.Hostname()) || o.insecureIssuers {
			return nil
		}
		return fmt.Errorf("%s %q is http on a host that is not loopback: tokens and keys would cross the network in clear text; use https (a development cluster may allow http explicitly)", field, raw)
	}
	return fmt.Errorf("%s %q must be https", field, raw)
}

// IsLoopbackHost says whether host (no port) is this machine.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
