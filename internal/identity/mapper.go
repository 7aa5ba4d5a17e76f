package identity

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// ErrClaims means a verified token's claims do not make an acceptable
// identity: a claim is missing or of the wrong type, a validation rule
// failed, or a mapped name is one Kubernetes keeps (system:).
var ErrClaims = errors.New("the token's claims are not accepted")

// Mapper turns the verified claims of one issuer's tokens into an
// Identity, by its claim mappings and validation rules. The bridge and the
// console use the same Mapper, so a person has the same names in both.
// Safe for concurrent use.
type Mapper struct {
	issuer     string
	username   mapping
	groups     mapping
	validation []rule
}

type mapping struct {
	claim, prefix string
	expr          cel.Program // nil: claim
}

type rule struct {
	claim, required, message string
	expr                     cel.Program // nil: claim and required
	source                   string
}

// celCostLimit bounds the work of one evaluation of an expression, whose
// input (a token's claims) the caller writes: a list of a few thousand
// groups mapped or searched is far below it, a comprehension nested over a
// large claim to use the CPU is stopped. The unit is CEL's cost, roughly
// one per operation.
const celCostLimit = 1_000_000

// celEnv is the CEL environment of claim mappings and rules: claims is the
// token's payload, as Kubernetes' structured authentication names it.
func celEnv() (*cel.Env, error) {
	return cel.NewEnv(cel.Variable("claims", cel.MapType(cel.StringType, cel.DynType)))
}

// NewMapper compiles j's mappings and rules.
func NewMapper(j JWTAuthenticator) (*Mapper, error) {
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	m := &Mapper{issuer: j.Issuer.URL}
	var errs []error
	compile := func(field, src string) cel.Program {
		ast, iss := env.Compile(src)
		if iss.Err() != nil {
			errs = append(errs, fmt.Errorf("%s: the CEL expression %q does not compile: %w", field, src, iss.Err()))
			return nil
		}
		p, err := env.Program(ast, cel.CostLimit(celCostLimit))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
			return nil
		}
		return p
	}
	cm := j.ClaimMappings
	m.username = mapping{claim: cm.Username.Claim, prefix: cm.Username.Prefix}
	if cm.Username.Expression != "" {
		m.username.expr = compile("claimMappings.username.expression", cm.Username.Expression)
	}
	m.groups = mapping{claim: cm.Groups.Claim, prefix: cm.Groups.Prefix}
	if cm.Groups.Expression != "" {
		m.groups.expr = compile("claimMappings.groups.expression", cm.Groups.Expression)
	}
	for i, r := range j.ClaimValidationRules {
		v := rule{claim: r.Claim, required: r.RequiredValue, message: r.Message, source: r.Expression}
		if r.Expression != "" {
			v.expr = compile(fmt.Sprintf("claimValidationRules[%d].expression", i), r.Expression)
		}
		m.validation = append(m.validation, v)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Identity maps verified claims (a JSON-decoded token payload) to the
// caller's identity, or says why they are not accepted (wrapping
// ErrClaims).
func (m *Mapper) Identity(claims map[string]any) (Identity, error) {
	vars := map[string]any{"claims": claims}
	for _, r := range m.validation {
		if err := r.check(claims, vars); err != nil {
			return Identity{}, fmt.Errorf("%w: %w", ErrClaims, err)
		}
	}
	names, err := m.username.names(claims, vars, "username")
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrClaims, err)
	}
	if len(names) != 1 {
		return Identity{}, fmt.Errorf("%w: the username mapping gives no single name", ErrClaims)
	}
	if m.username.claim == "email" {
		// As the API server does: an email the issuer says it has not
		// verified names nobody for sure.
		if v, ok := claims["email_verified"]; ok && v != true {
			return Identity{}, fmt.Errorf("%w: email_verified is not true", ErrClaims)
		}
	}
	var groups []string
	if m.groups.claim != "" || m.groups.expr != nil {
		if groups, err = m.groups.names(claims, vars, "groups"); err != nil {
			return Identity{}, fmt.Errorf("%w: %w", ErrClaims, err)
		}
	}
	// As the API server does for every user it authenticates, and as
	// TokenReview reports of ServiceAccounts: a ToolPolicy for
	// system:authenticated applies to every caller, and kubectl mcp can-i
	// counts it for every subject.
	groups = append(groups, AuthenticatedGroup)
	id := Identity{Kind: User, Username: names[0], Groups: groups, Issuer: m.issuer}
	// A mapping (an expression, most likely) must never produce a name
	// Kubernetes keeps: system:serviceaccount:..., system:masters.
	if strings.HasPrefix(id.Username, SystemPrefix) {
		return Identity{}, fmt.Errorf("%w: the username %q starts with %s", ErrClaims, id.Username, SystemPrefix)
	}
	for _, g := range groups[:len(groups)-1] {
		if strings.HasPrefix(g, SystemPrefix) {
			return Identity{}, fmt.Errorf("%w: the group %q starts with %s", ErrClaims, g, SystemPrefix)
		}
	}
	return id, nil
}

// names evaluates a mapping: a claim holding a string (or, for groups, a
// list of strings), prefixed; or an expression's
// string or list of strings.
func (mp mapping) names(claims, vars map[string]any, what string) ([]string, error) {
	var v any
	if mp.expr != nil {
		out, _, err := mp.expr.Eval(vars)
		if err != nil {
			return nil, fmt.Errorf("the %s expression failed: %w", what, err)
		}
		v = nativeValue(out)
	} else {
		var ok bool
		if v, ok = claims[mp.claim]; !ok {
			if what == "groups" {
				return nil, nil // no groups claim: no groups
			}
			return nil, fmt.Errorf("the token has no %s claim (the %s)", mp.claim, what)
		}
	}
	var list []string
	switch v := v.(type) {
	case string:
		list = []string{v}
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("the %s holds a %T, not a string", what, x)
			}
			list = append(list, s)
		}
	case []string:
		list = v
	default:
		return nil, fmt.Errorf("the %s is a %T, not a string or a list of strings", what, v)
	}
	for i, name := range list {
		switch {
		case mp.expr != nil:
			// The expression built the whole name; it must be in the
			// issuer's own namespace, and more than the prefix alone.
			if !strings.HasPrefix(name, mp.prefix) || name == mp.prefix {
				return nil, fmt.Errorf("the %s expression gave %q, which does not start with the prefix %q followed by a name", what, name, mp.prefix)
			}
		case name == "":
			// Checked before the prefix is put: "" would become the
			// bare prefix, a name shared by everyone whose claim is empty.
			return nil, fmt.Errorf("the %s claim %s holds an empty name", what, mp.claim)
		default:
			list[i] = mp.prefix + name
		}
	}
	return list, nil
}

// check applies one validation rule.
func (r rule) check(claims, vars map[string]any) error {
	if r.expr == nil {
		if v, ok := claims[r.claim].(string); ok && v == r.required {
			return nil
		}
		return r.failed(fmt.Sprintf("claim %s must be %q", r.claim, r.required))
	}
	out, _, err := r.expr.Eval(vars)
	if err != nil {
		return r.failed(fmt.Sprintf("%s failed: %v", r.source, err))
	}
	if out != types.True {
		return r.failed(fmt.Sprintf("%s is not true", r.source))
	}
	return nil
}

func (r rule) failed(what string) error {
	if r.message != "" {
		return errors.New(r.message)
	}
	return errors.New(what)
}

// nativeValue converts a CEL result to Go strings and lists.
func nativeValue(v ref.Val) any {
	switch v.Type() {
	case types.StringType:
		return v.Value()
	case types.ListType:
		if l, err := v.ConvertToNative(reflectStrings); err == nil {
			return l
		}
	}
	return v.Value()
}

var reflectStrings = reflect.TypeFor[[]string]()
