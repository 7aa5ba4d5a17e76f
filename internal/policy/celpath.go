package policy

import (
	"path"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/mcp-operator/mcp-operator/internal/policy/resourceuri"
)

// pathClean gives `when` conditions path.clean(s): the shortest path naming
// what s names lexically ('/' separators; repeated slashes, '.' and '..'
// resolved; Go's path.Clean). A prefix test on a raw path is unsafe:
// args.path.startsWith('/data/public/') holds for
// /data/public/../secret/key.txt, which a file server opens as
// /data/secret/key.txt. path.clean(args.path).startsWith('/data/public/')
// does not. Lexical only: a symbolic link below /data/public/ is still
// followed by the server.
var pathClean = stringFunction("path.clean", "path_clean_string", func(s string) (string, error) {
	return path.Clean(s), nil
})

// uriCanonical gives `when` conditions uri.canonical(s): the one form the
// bridge decides resource URIs on (package resourceuri: scheme and host in
// lower case, default ports dropped, dot segments and repeated slashes
// removed). A URI with no such form (user info, a host ending in a dot,
// control characters) is an error, which denies. A prefix test on a raw URL
// is unsafe: args.url.startsWith('https://example.com') holds for
// https://example.com.evil.test/ and https://example.com@evil.test/;
// uri.canonical(args.url).startsWith('https://example.com/') holds for
// neither.
var uriCanonical = stringFunction("uri.canonical", "uri_canonical_string", resourceuri.Canonical)

// stringFunction is a CEL function of one string giving a string; an error
// is a CEL error (which denies the call).
func stringFunction(name, overload string, f func(string) (string, error)) cel.EnvOption {
	return cel.Function(name,
		cel.Overload(overload, []*cel.Type{cel.StringType}, cel.StringType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.(types.String)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				out, err := f(string(s))
				if err != nil {
					return types.NewErr("%s: %v", name, err)
				}
				return types.String(out)
			})))
}
