package mcpbridge

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Cache hints (2026-07-28): the bridge's list answers and server/discover
// say how long they may be cached (ttlMs) and by whom (cacheScope).
//
// A list is filtered per caller, so it is "private": a shared cache must
// never hand one caller's list to another. Only what is the same for
// every caller is "public": server/discover and the meta-tools' list on
// SearchPath. The bridge's own lists stay fresh for listTTL at most, and
// never longer than a server said its part is fresh: a server's ttlMs is
// honoured, both for the catalog the bridge keeps (routes.Catalog) and in
// the ttlMs the bridge gives. A ToolPolicy change is seen by the next
// list after that at the latest; a call is decided when it is made in any
// case, so a stale list can offer a tool, never grant it.
//
// Hints are given to 2026-07-28 requests only (the revision that defines
// them), and never on a retry's answer (a result that depends on
// inputResponses is not cacheable).

// listTTL is how long the bridge's lists are fresh when no server says
// less.
const listTTL = 60 * time.Second

// Cache scopes.
const (
	scopePublic  = "public"
	scopePrivate = "private"
)

// freshness is how long an answer being built may be cached: listTTL at
// first, less as its parts say less.
type freshness struct{ ttl time.Duration }

func newFreshness() freshness { return freshness{ttl: listTTL} }

// server takes a part a server listed just now.
func (f *freshness) server(s client.Freshness) {
	if s.Given {
		f.ttl = min(f.ttl, s.TTL)
	}
}

// catalog takes a catalog the bridge keeps: fresh until it expires.
func (f *freshness) catalog(c *routes.Catalog, now time.Time) {
	if at, ok := c.Expires(); ok {
		f.ttl = min(f.ttl, max(at.Sub(now), 0))
	}
}

// withCacheHints adds ttlMs and cacheScope to result where rq's revision
// has them.
func withCacheHints(rq *request, result json.RawMessage, f freshness, scope string) json.RawMessage {
	if !rq.stateless || rawjson.Get(rq.msg.Params, "inputResponses") != nil || rawjson.Get(rq.msg.Params, "requestState") != nil {
		return result
	}
	result = rawjson.Set(result, "ttlMs", strconv.AppendInt(nil, f.ttl.Milliseconds(), 10))
	return rawjson.Set(result, "cacheScope", rawjson.AppendString(nil, scope))
}

// listResult answers a list: {key: items}, private to the caller.
func listResult(rq *request, key string, items [][]byte, f freshness) *jsonrpc.Message {
	out := rawjson.AppendString([]byte{'{'}, key)
	out = append(out, ':')
	out = append(rawjson.AppendArray(out, items), '}')
	return rpcResult(rq, withCacheHints(rq, out, f, scopePrivate))
}
