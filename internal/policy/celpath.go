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
var pathClean = cel.Function("path.clean",
	cel.Overload("path_clean_string", []*cel.Type{cel.StringType}, cel.StringType,
		cel.UnaryBinding(func(v ref.Val) ref.Val {
			s, ok := v.(types.String)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			return types.String(path.Clean(string(s)))
		})))

// uriCanonical gives `when` conditions uri.canonical(s): the one form the
// bridge decides resource URIs on (package resourceuri: scheme and host in
// lower case, default ports dropped, dot segments and repeated slashes
// removed). A URI with no such form (user info, a host ending in a dot,
// control characters) is an error, which denies. A prefix test on a raw URL
// is unsafe: args.url.startsWith('https://example.com') holds for
// https://example.com.evil.test/ and https://example.com@evil.test/;
// uri.canonical(args.url).startsWith('https://example.com/') holds for
// neither.
var uriCanonical = cel.Function("uri.canonical",
	cel.Overload("uri_canonical_string", []*cel.Type{cel.StringType}, cel.StringType,
		cel.UnaryBinding(func(v ref.Val) ref.Val {
			s, ok := v.(types.String)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			c, err := resourceuri.Canonical(string(s))
			if err != nil {
				return types.NewErr("uri.canonical: %v", err)
			}
			return types.String(c)
		})))
