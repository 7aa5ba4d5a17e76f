package policy

import (
	"path"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
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
