package mcpbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/translate"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/policy/resourceuri"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// BridgeURI is the URI /mcp shows for a server's resource.
func BridgeURI(server, uri string) string { return translate.BridgeURI(server, uri) }

// ParseBridgeURI reverses BridgeURI.
func ParseBridgeURI(u string) (server, uri string, ok bool) { return translate.ParseBridgeURI(u) }

func (b *Bridge) listResources(rq *request, method, key, uriKey string) *jsonrpc.Message {
	eng := b.engine.Load()
	var items [][]byte
	f := newFreshness()
	for _, name := range b.servers(rq) {
		s, conn, ok := b.cfg.Registry.Server(name)
		if !ok || !s.Capabilities.Resources {
			continue
		}
		ctx, cancel := b.contextWithCallTimeout(rq.ctx)
		list, fresh, err := conn.ListAllFresh(ctx, method, key)
		cancel()
		if err != nil {
			b.cfg.Log.Info("a server's resources are left out of the list", "server", name, "error", b.redactor(s).String(err.Error(), nil))
			continue
		}
		f.server(fresh)
		items = append(items, shownItems(b, method, list, func(item json.RawMessage) (*routes.Server, []byte, bool) {
			listed, _ := rawjson.String(rawjson.Get(item, uriKey))
			// Listed and decided in the form a read will be decided and
			// forwarded in; one with no such form can't be read.
			uri, err := resourceuri.Canonical(listed)
			if listed == "" || err != nil {
				return nil, nil, false
			}
			read := policy.ResourceRead{Server: s.Name, Namespace: s.Namespace, URI: uri}
			if eng.DecideResource(rq.id.Subject(), read).Decision == v1alpha1.DecisionDeny {
				return nil, nil, false
			}
			if rq.endpoint == "" {
				item = rawjson.Set(item, uriKey, rawjson.AppendString(nil, BridgeURI(s.Name, uri)))
			} else if uri != listed {
				item = rawjson.Set(item, uriKey, rawjson.AppendString(nil, uri))
			}
			return s, item, true
		})...)
	}
	return listResult(rq, key, items, f)
}

// locateResource finds the server and upstream URI of a URI in the agent's
// view (mcp://<server>/<uri> on /mcp, the server's own on its endpoint);
// the message answers an unknown one. conn is nil when the server is away. The URI is the canonical form: the
// one decided, recorded and forwarded, whatever the agent's spelling.
func (b *Bridge) locateResource(rq *request, agentURI string) (*routes.Server, upstreamConn, string, *jsonrpc.Message) {
	server, uri := rq.endpoint, agentURI
	if server == "" {
		var ok bool
		if server, uri, ok = ParseBridgeURI(agentURI); !ok {
			return nil, nil, "", rpcError(rq, jsonrpc.CodeResourceNotFound, fmt.Sprintf("unknown resource %q: resources here are named %s<server>/<uri>", agentURI, translate.URIPrefix), nil)
		}
	}
	s, conn, ok := b.target(server)
	if !ok || !s.Capabilities.Resources {
		return nil, nil, "", rpcError(rq, jsonrpc.CodeResourceNotFound, fmt.Sprintf("unknown resource %q: server %q serves no resources here", agentURI, server), nil)
	}
	canonical, err := resourceuri.Canonical(uri)
	if err != nil {
		return nil, nil, "", rpcError(rq, jsonrpc.CodeInvalidParams, fmt.Sprintf("resource URI %q refused: %v", agentURI, err), nil)
	}
	return s, conn, canonical, nil
}

// read is the resources adapter of the pipeline: one resources/read.
type read struct {
	*exchange
	conn upstreamConn
	// uri is the server's own URI; shown is the one the agent sent.
	uri, shown string
}

func (b *Bridge) readResource(rq *request) *jsonrpc.Message { return b.serve(rq, &read{}) }

func (r *read) resolve(b *Bridge, x *exchange) *jsonrpc.Message {
	r.exchange = x
	rq := x.rq
	var p struct {
		URI  string       `json:"uri"`
		Meta progressMeta `json:"_meta"`
	}
	if err := json.Unmarshal(rq.msg.Params, &p); err != nil || p.URI == "" {
		return rpcError(rq, jsonrpc.CodeInvalidParams, "resources/read needs params with a uri", nil)
	}
	if sha, ok := artifact.ParseURI(p.URI); ok {
		// The bridge's own store, not a server: the subject who made it
		// reads it back.
		return b.readArtifact(rq, p.URI, sha)
	}
	s, conn, uri, unknown := b.locateResource(rq, p.URI)
	if unknown != nil {
		return unknown
	}
	x.server, x.progressToken = s, p.Meta.ProgressToken
	r.conn, r.uri, r.shown = conn, uri, p.URI
	x.resolvedAway = conn == nil
	x.method, x.target = methodRead, BridgeURI(s.Name, uri)
	x.action, x.what = "read the resource "+p.URI, "read of "+p.URI
	x.readRetry()
	return nil
}

func (r *read) decide(b *Bridge, x *exchange) (policy.Result, *jsonrpc.Message) {
	if sk, ok := skillOf(r.server, r.uri); ok {
		// A skill's files are the skill's: its rules decide them.
		return b.engine.Load().DecideSkill(x.rq.id.Subject(), policy.SkillGet{Name: sk.Name, Server: r.server.Name, Namespace: r.server.Namespace}), nil
	}
	return b.engine.Load().DecideResource(x.rq.id.Subject(), policy.ResourceRead{Server: r.server.Name, Namespace: r.server.Namespace, URI: r.uri}), nil
}

func (r *read) describe(b *Bridge, x *exchange) (*upstreamCall, *jsonrpc.Message) {
	rq, s := x.rq, r.server
	conn := x.callConn(r.conn)
	return &upstreamCall{
		method: methodRead, conn: conn, what: "resource " + r.shown,
		params:  rawjson.Set(translate.UpstreamParams(rq.msg.Params), "uri", rawjson.AppendString(nil, r.uri)),
		started: audit.ResourceRequested{Server: s.Name, URI: r.uri, ToolCallID: x.id, Credential: string(x.credKind)},
		check: func(raw json.RawMessage) *jsonrpc.Message {
			sk, ok := skillOf(s, r.uri)
			if !ok {
				return nil
			}
			if err := b.verifySkillFile(rq.ctx, rq, s, conn, sk, r.uri, raw); err != nil {
				return b.skillRefused(x, err)
			}
			return nil
		},
		output: func(raw json.RawMessage) (json.RawMessage, output.Summary, error) {
			out, sum, err := b.cfg.Pipeline.ResourceResult(output.Call{
				Server: s.Name, Name: r.uri, Subject: rq.id.Username, Redactor: b.redactor(s), Block: x.blockInjection,
			}, raw)
			if err == nil && rq.endpoint == "" {
				out = translate.ContentURIs(out, s.Name)
			}
			return out, sum, err
		},
		closing: func(raw json.RawMessage, scan output.Summary, _ time.Duration, _ error) (audit.Payload, string) {
			sum := sha256.Sum256(raw)
			return audit.ResourceFetched{
				Server: s.Name, URI: r.uri, SizeBytes: len(raw), ContentHash: "sha256:" + hex.EncodeToString(sum[:]),
				Injection: scan.Findings, Blocked: scan.Blocked, ToolCallID: x.id,
			}, ""
		},
	}, nil
}

// readArtifact returns a capped result to the subject that produced it,
// recorded like any read (server "": the bridge holds it).
func (b *Bridge) readArtifact(rq *request, uri, sha string) *jsonrpc.Message {
	if b.cfg.Artifacts == nil {
		return rpcError(rq, jsonrpc.CodeResourceNotFound, "unknown resource "+uri, nil)
	}
	x := &exchange{rq: rq, method: methodRead, target: uri}
	if _, err := b.audit(rq, audit.ResourceRequested{URI: uri}); err != nil {
		return b.unrecorded(x, err)
	}
	data, err := b.cfg.Artifacts.Get(rq.id.Username, sha)
	if err != nil {
		return rpcError(rq, jsonrpc.CodeResourceNotFound, "unknown resource "+uri, nil)
	}
	// It was stored redacted with its server's Secret values and scanned
	// whole, but it leaves as any result does: redacted by shape and scanned
	// again, and withheld when the bridge blocks injections (it may have
	// been stored by a replica, or before the bridge was set to block).
	size := len(data)
	data, scan, err := output.Artifact(output.Call{Name: uri, Subject: rq.id.Username, Block: b.cfg.BlockInjection}, data)
	_, _ = b.audit(rq, audit.ResourceFetched{URI: uri, SizeBytes: size, ContentHash: "sha256:" + sha, Injection: scan.Findings, Blocked: scan.Blocked})
	if err != nil {
		return b.withheld(x, "resource "+uri, err)
	}
	out := []byte(`{"contents":[{"uri":`)
	out = rawjson.AppendString(out, uri)
	out = append(out, `,"mimeType":"application/json","text":`...)
	out = rawjson.AppendString(out, string(data))
	return rpcResult(rq, json.RawMessage(append(out, `}]}`...)))
}
