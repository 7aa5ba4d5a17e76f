package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// style is how tool names are rendered on the request's endpoint.
func (b *Bridge) style(rq *request) string {
	if rq.endpoint != "" {
		return "upstream"
	}
	return b.cfg.ToolNameStyle
}

// servers are the servers whose tools an endpoint lists: the served ones
// and those away but expected back.
func (b *Bridge) servers(rq *request) []string {
	if rq.endpoint != "" {
		if _, _, ok := b.cfg.Registry.Server(rq.endpoint); ok {
			return []string{rq.endpoint}
		}
		if a, ok := b.cfg.Registry.Away(rq.endpoint); ok && a.Expected() {
			return []string{rq.endpoint}
		}
		return nil
	}
	return b.cfg.Registry.Listed()
}

// toolCall is the engine's view of a call of t with args, JSON text that the
// engine decodes only for a condition that reads it.
func toolCall(t *routes.Tool, args json.RawMessage) policy.ToolCall {
	return policy.ToolCall{Name: t.Name, Server: t.Server.Name, Namespace: t.Server.Namespace, Risk: t.Risk, Annotations: t.Annotations, RawArgs: args}
}

// liveCatalogs are the catalogs of the endpoint's servers, listed again
// where a server's ttlMs says so, with the servers whose catalog could not
// be listed left out (and logged): what an agent's list is built from.
func (b *Bridge) liveCatalogs(rq *request) []*routes.Catalog {
	return b.catalogs(rq, b.cfg.Registry.FreshCatalog)
}

// keptCatalogs are liveCatalogs as kept, listed only where never listed
// yet: what a call is resolved in (a ttlMs is about lists, not calls).
func (b *Bridge) keptCatalogs(rq *request) []*routes.Catalog {
	return b.catalogs(rq, b.cfg.Registry.Catalog)
}

func (b *Bridge) catalogs(rq *request, get func(context.Context, string) (*routes.Catalog, error)) []*routes.Catalog {
	var out []*routes.Catalog
	for _, name := range b.servers(rq) {
		c, err := get(rq.ctx, name)
		if err != nil {
			b.cfg.Log.Info("a server's tools are left out of the list", "server", name, "error", b.redactorOf(name).String(err.Error(), nil))
			continue
		}
		out = append(out, c)
	}
	return out
}

// visibleIn are the tools of catalogs the caller may call.
func (b *Bridge) visibleIn(rq *request, catalogs []*routes.Catalog) []*routes.Tool {
	eng, subject := b.engine.Load(), rq.id.Subject()
	var out []*routes.Tool
	for _, c := range catalogs {
		for _, t := range c.Tools {
			if eng.ToolVisible(subject, toolCall(t, nil)) {
				out = append(out, t)
			}
		}
	}
	return out
}

func (b *Bridge) listTools(rq *request) *jsonrpc.Message {
	if rq.search {
		return rpcResult(rq, withCacheHints(rq, metaTools, newFreshness(), scopePublic))
	}
	catalogs := b.liveCatalogs(rq)
	// The registry's clock: catalogs expire by it.
	f, now := newFreshness(), time.Now()
	for _, c := range catalogs {
		f.catalog(c, now)
	}
	style := b.style(rq)
	items := shownItems(b, "tools/list", b.visibleIn(rq, catalogs), func(t *routes.Tool) (*routes.Server, []byte, bool) {
		return t.Server, t.Rendered(style), true
	})
	return listResult(rq, "tools", items, f)
}

// listedTool is t as a list (tools/list, find_tools) shows it in style,
// cleaned as every listed item is (listedItem): the controller cleaned
// status already, but a value the server was given after its probe is
// known here first.
func (b *Bridge) listedTool(t *routes.Tool, style string) ([]byte, bool) {
	return b.listedItem(t.Server, "tools/list", t.Rendered(style))
}

// resolveTool finds the tool a name means, strictly: the full namespaced
// name (either style on /mcp), or the upstream name on a server's own
// endpoint. A bare name on /mcp is never guessed.
func (b *Bridge) resolveTool(rq *request, name string) (*routes.Tool, *jsonrpc.Message) {
	if rq.endpoint != "" {
		c, err := b.cfg.Registry.Catalog(rq.ctx, rq.endpoint)
		if err != nil {
			return nil, b.catalogError(rq, rq.endpoint, err)
		}
		if t := c.ByName[name]; t != nil {
			return t, nil
		}
		return nil, unknownTool(rq, fmt.Sprintf("unknown tool %q", name), nil)
	}
	if server, tool, ok := toolname.SplitNamespaced(name); ok {
		if c, err := b.cfg.Registry.Catalog(rq.ctx, server); err == nil {
			if t := c.ByName[tool]; t != nil && t.Name == name {
				return t, nil
			}
		} else if _, _, known := b.target(server); known {
			return nil, b.catalogError(rq, server, err)
		}
	}
	var candidates []string
	for _, t := range b.visibleIn(rq, b.keptCatalogs(rq)) {
		switch {
		case b.cfg.ToolNameStyle == StyleUnderscore && t.Underscore == name:
			return t, nil
		case t.Upstream == name:
			// Named only if lists show it: a name is no way around what
			// the output pipeline left out of them.
			if _, shown := b.listedTool(t, b.cfg.ToolNameStyle); shown {
				candidates = append(candidates, t.Name)
			}
		}
	}
	slices.Sort(candidates)
	switch len(candidates) {
	case 0:
		return nil, unknownTool(rq, fmt.Sprintf("unknown tool %q", name), nil)
	case 1:
		return nil, unknownTool(rq, fmt.Sprintf("unknown tool %q: names are never guessed; call it by its full name %s", name, candidates[0]), candidates)
	}
	_, _ = b.audit(rq, audit.ToolAmbiguousCall{Tool: name, Candidates: candidates})
	return nil, unknownTool(rq, fmt.Sprintf("ambiguous tool name %q: several servers have it; call one of %s", name, strings.Join(candidates, ", ")), candidates)
}

// unknownTool refuses a call of a name no tool (or several) answers to:
// nothing ran, and the same name is refused again until the catalogs
// change; candidates, when any, are the full names it may have meant.
func unknownTool(rq *request, msg string, candidates []string) *jsonrpc.Message {
	data := map[string]any{}
	if len(candidates) > 0 {
		data["candidates"] = candidates
	}
	return rpcError(rq, jsonrpc.CodeInvalidParams, msg, retryNever.with(data))
}

// catalogError answers a request whose server's catalog could not be
// listed: the error may quote the server's answer, so it is redacted with
// the server's own Secret values, as its output is.
func (b *Bridge) catalogError(rq *request, server string, err error) *jsonrpc.Message {
	return upstreamError(rq, err, "", b.redactorOf(server), false)
}
