// Package policy is the permission engine: it compiles ToolPolicies into an
// index and decides, for one caller and one request (tool call, resource read
// or prompt), whether the request is allowed, denied or must be asked about.
//
// The rules (docs/toolpolicy.md):
//   - only policies whose subjects match the caller and that live in the
//     namespace of the server being called count;
//   - every rule of those policies that matches the request counts, and the
//     most restrictive decision wins: deny over ask over allow;
//   - no matching rule denies (SourcedFrom "default");
//   - a destructive tool is never allowed, at most asked;
//   - a `when` condition that fails at call time (an error, or more than its
//     cost budget) denies, with the reason;
//   - a tool call or prompt a matching rule marks injection: Block gets
//     Result.BlockInjection, whichever rule decided it: the bridge then
//     withholds a result its injection scan flags.
//
// The Engine is immutable once built and safe for concurrent use; the bridge
// builds a new one whenever a ToolPolicy changes. Two small stateful pieces sit
// beside it, each owned by its user: SessionGrants (the answers a human gave to
// "ask" in one session) and RateLimiter (token buckets per subject and policy).
// A request goes through them in this order:
//
//	r := engine.DecideTool(subject, call)
//	r = grants.Apply(r)            // ask → allow when the session holds a grant
//	r = limiter.Apply(subject, r)  // deny when a policy's rate limit is spent
//
// Names. Tool and prompt globs match namespaced names mcp.<server>.<name>:
// `*` matches any run of characters except '.', `**` matches any run,
// `?` matches one character other than '.'; everything else matches itself
// (names and URIs are ASCII; a glob's '?' matches one byte).
// So mcp.fs.* never matches mcp.fs-v2.read, and mcp.fs.* does not match a
// dotted upstream name such as mcp.fs.a.b (mcp.fs.** does). A tool or prompt
// glob that can never match (fs.*, mcp.fs, mcp.*) is a compile error. Server globs
// (resources[].servers) follow the same rules on MCPServer names. URI globs
// (resources[].uris) have one wildcard: `*` (and `**`, its synonym) matches any
// run of characters including '/', `?` matches one character, and a URI glob
// holds no space, control or non-ASCII character (percent-encode them as the
// URI does); so file:///data/* covers the whole tree below /data. Because such a glob would
// also match file:///data/../etc/passwd, a resource URI that holds a '..'
// path segment (also percent-encoded) is denied before any rule is looked at.
package policy
