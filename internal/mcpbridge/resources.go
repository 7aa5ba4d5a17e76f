package mcpbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/policy/resourceuri"
)

// uriPrefix starts the URIs /mcp shows for servers' resources:
// mcp://<server>/<the server's own URI>. Server names hold no '/', so the
// rewriting reverses exactly.
const uriPrefix = "mcp://"

// CodeResourceNotFound is MCP's error for an unknown resource.
const CodeResourceNotFound = -32002

// BridgeURI is the URI /mcp shows for a server's resource.
func BridgeURI(server, uri string) string { return uriPrefix + server + "/" + uri }

// ParseBridgeURI reverses BridgeURI.
func ParseBridgeURI(u string) (server, uri string, ok bool) {
	rest, ok := strings.CutPrefix(u, uriPrefix)
	if !ok {
		return "", "", false
	}
	server, uri, ok = strings.Cut(rest, "/")
	return server, uri, ok && server != "" && uri != ""
}

func (b *Bridge) listResources(rq *request, method, key, uriKey string) *jsonrpc.Message {
	eng := b.engine.Load()
	var items [][]byte
	for _, name := range b.servers(rq) {
		s, conn, ok := b.cfg.Registry.Server(name)
		if !ok || !s.Capabilities.Resources {
			continue
		}
		ctx, cancel := b.contextWithCallTimeout(rq.ctx)
		list, err := conn.ListAll(ctx, method, key)
		cancel()
		if err != nil {
			b.cfg.Log.Info("a server's resources are left out of the list", "server", name, "error", err.Error())
			continue
		}
		for _, item := range list {
			listed, _ := rawjson.String(rawjson.Get(item, uriKey))
			// Listed and decided in the form a read will be decided and
			// forwarded in; one with no such form can't be read.
			uri, err := resourceuri.Canonical(listed)
			if listed == "" || err != nil {
				continue
			}
			read := policy.ResourceRead{Server: s.Name, Namespace: s.Namespace, URI: uri}
			if eng.DecideResource(rq.id.Subject, read).Decision == v1alpha1.DecisionDeny {
				continue
			}
			if rq.endpoint == "" {
				item = replaceMember(item, uriKey, rawjson.AppendString(nil, BridgeURI(s.Name, uri)))
			} else if uri != listed {
				item = replaceMember(item, uriKey, rawjson.AppendString(nil, uri))
			}
			// Names, titles and descriptions are the server's output too.
			if clean, _, err := output.JSON(b.redactor(s), "resources/list", item); err == nil {
				item = clean
			}
			items = append(items, item)
		}
	}
	out := append([]byte(`{"`+key+`":`), rawjson.AppendArray(nil, items)...)
	return rpcResult(rq, json.RawMessage(append(out, '}')))
}

// locateResource finds the server and upstream URI of a URI in the agent's
// view (mcp://<server>/<uri> on /mcp, the server's own on its endpoint);
// the message answers an unknown one. The URI is the canonical form: the
// one decided, recorded and forwarded, whatever the agent's spelling.
func (b *Bridge) locateResource(rq *request, agentURI string) (*routes.Server, *upstream.Conn, string, *jsonrpc.Message) {
	server, uri := rq.endpoint, agentURI
	if server == "" {
		var ok bool
		if server, uri, ok = ParseBridgeURI(agentURI); !ok {
			return nil, nil, "", rpcError(rq, CodeResourceNotFound, fmt.Sprintf("unknown resource %q: resources here are named %s<server>/<uri>", agentURI, uriPrefix), nil)
		}
	}
	s, conn, ok := b.cfg.Registry.Server(server)
	if !ok || !s.Capabilities.Resources {
		return nil, nil, "", rpcError(rq, CodeResourceNotFound, fmt.Sprintf("unknown resource %q: server %q serves no resources here", agentURI, server), nil)
	}
	canonical, err := resourceuri.Canonical(uri)
	if err != nil {
		return nil, nil, "", rpcError(rq, jsonrpc.CodeInvalidParams, fmt.Sprintf("resource URI %q refused: %v", agentURI, err), nil)
	}
	return s, conn, canonical, nil
}

func (b *Bridge) readResource(rq *request) *jsonrpc.Message {
	var p struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(rq.msg.Params, &p); err != nil || p.URI == "" {
		return rpcError(rq, jsonrpc.CodeInvalidParams, "resources/read needs params with a uri", nil)
	}
	if sha, ok := artifact.ParseURI(p.URI); ok {
		return b.readArtifact(rq, p.URI, sha)
	}
	s, conn, uri, unknown := b.locateResource(rq, p.URI)
	if unknown != nil {
		return unknown
	}
	res := b.engine.Load().DecideResource(rq.id.Subject, policy.ResourceRead{Server: s.Name, Namespace: s.Namespace, URI: uri})
	id, refused := b.permitRead(rq, s.Name, uri, p.URI, res)
	if refused != nil {
		return refused
	}
	if _, err := b.audit(rq, audit.ResourceRequested{Server: s.Name, URI: uri, ToolCallID: id}); err != nil {
		return rpcError(rq, jsonrpc.CodeInternalError, "the read was not run: its audit record could not be written", nil)
	}
	ctx, cancel := b.contextWithCallTimeout(rq.ctx)
	defer cancel()
	start := b.now()
	raw, err := conn.Call(ctx, "resources/read", replaceMember(upstreamParams(rq.msg.Params), "uri", rawjson.AppendString(nil, uri)))
	b.observe(s.Name, "resources/read", b.now().Sub(start), err)
	if err != nil {
		return upstreamError(rq, err, "")
	}
	sum := sha256.Sum256(raw)
	out, _, err := b.cfg.Pipeline.ResourceResult(output.Call{
		Server: s.Name, Name: uri, Subject: rq.id.Username, Redactor: b.redactor(s), Block: b.cfg.BlockInjection,
	}, raw)
	_, _ = b.audit(rq, audit.ResourceFetched{Server: s.Name, URI: uri, SizeBytes: len(raw), ContentHash: "sha256:" + hex.EncodeToString(sum[:]), ToolCallID: id})
	if err != nil {
		if errors.Is(err, output.ErrBlocked) {
			return rpcError(rq, CodeDenied, "resource "+p.URI+": "+err.Error(), map[string]any{"reason": reasonInjection})
		}
		return rpcError(rq, CodeUpstream, err.Error(), map[string]any{"reason": "invalid_result"})
	}
	if rq.endpoint == "" {
		out = rewriteContentURIs(out, s.Name)
	}
	return rpcResult(rq, json.RawMessage(out))
}

// rewriteContentURIs names the server in each contents[].uri.
func rewriteContentURIs(res []byte, server string) []byte {
	contents := rawjson.Get(res, "contents")
	items, err := rawjson.Elements(contents)
	if err != nil {
		return res
	}
	for i, item := range items {
		if uri, ok := rawjson.String(rawjson.Get(item, "uri")); ok && uri != "" {
			items[i] = replaceMember(item, "uri", rawjson.AppendString(nil, BridgeURI(server, uri)))
		}
	}
	return replaceMember(res, "contents", rawjson.AppendArray(nil, items))
}

// readArtifact returns a capped result to the subject that produced it,
// recorded like any read (server "": the bridge holds it).
func (b *Bridge) readArtifact(rq *request, uri, sha string) *jsonrpc.Message {
	if b.cfg.Artifacts == nil {
		return rpcError(rq, CodeResourceNotFound, "unknown resource "+uri, nil)
	}
	if _, err := b.audit(rq, audit.ResourceRequested{URI: uri}); err != nil {
		return rpcError(rq, jsonrpc.CodeInternalError, "the read was not run: its audit record could not be written", nil)
	}
	data, err := b.cfg.Artifacts.Get(rq.id.Username, sha)
	if err != nil {
		return rpcError(rq, CodeResourceNotFound, "unknown resource "+uri, nil)
	}
	_, _ = b.audit(rq, audit.ResourceFetched{URI: uri, SizeBytes: len(data), ContentHash: "sha256:" + sha})
	out := []byte(`{"contents":[{"uri":`)
	out = rawjson.AppendString(out, uri)
	out = append(out, `,"mimeType":"application/json","text":`...)
	out = rawjson.AppendString(out, string(data))
	return rpcResult(rq, json.RawMessage(append(out, `}]}`...)))
}
