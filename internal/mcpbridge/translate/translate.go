// Package translate holds the bridge's pure translations between JSON
// documents: what goes upstream from what an agent sent, and what goes back.
// No I/O, no state: each function is tested from testdata/<case>.in.json to
// <case>.out.json (go test -update rewrites the outputs).
package translate

import (
	"encoding/json"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// URIPrefix starts the URIs /mcp shows for servers' resources:
// mcp://<server>/<the server's own URI>. Server names hold no '/', so the
// rewriting reverses exactly.
const URIPrefix = "mcp://"

// BridgeURI is the URI /mcp shows for a server's resource.
func BridgeURI(server, uri string) string { return URIPrefix + server + "/" + uri }

// ParseBridgeURI reverses BridgeURI.
func ParseBridgeURI(u string) (server, uri string, ok bool) {
	rest, ok := strings.CutPrefix(u, URIPrefix)
	if !ok {
		return "", "", false
	}
	server, uri, ok = strings.Cut(rest, "/")
	return server, uri, ok && server != "" && uri != ""
}

// CallParams are the params sent upstream: the upstream tool name, the
// arguments ({} when none: some servers refuse null), and the agent's _meta
// without the keys that describe the agent's connection to the bridge
// (protocol version, client capabilities: the bridge's own client states
// its own) and without progressToken (the upstream connection sets its own).
func CallParams(upstreamName string, args, params json.RawMessage) json.RawMessage {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	out := []byte(`{"name":`)
	out = rawjson.AppendString(out, upstreamName)
	out = append(out, `,"arguments":`...)
	out = append(out, args...)
	if meta := forwardMeta(rawjson.Get(params, "_meta")); meta != nil {
		out = append(out, `,"_meta":`...)
		out = append(out, meta...)
	}
	return append(out, '}')
}

func forwardMeta(meta []byte) []byte {
	if meta == nil {
		return nil
	}
	ms, err := rawjson.Members(meta)
	if err != nil {
		return nil
	}
	kept := ms[:0]
	for _, m := range ms {
		if m.Key == "progressToken" || strings.HasPrefix(m.Key, "io.modelcontextprotocol/") {
			continue
		}
		kept = append(kept, m)
	}
	if len(kept) == 0 {
		return nil
	}
	return rawjson.AppendObject(nil, kept)
}

// StripBridgeMeta removes the agent's connection _meta from params that go
// upstream unchanged otherwise.
func StripBridgeMeta(params json.RawMessage) json.RawMessage {
	if rawjson.Get(params, "_meta") == nil {
		return params
	}
	meta := forwardMeta(rawjson.Get(params, "_meta"))
	if meta == nil {
		return rawjson.Remove(params, "_meta")
	}
	return rawjson.Set(params, "_meta", meta)
}

// SetMeta sets one key of params._meta.
func SetMeta(params json.RawMessage, key string, value []byte) json.RawMessage {
	meta := rawjson.Get(params, "_meta")
	if meta == nil {
		meta = []byte(`{}`)
	}
	return rawjson.Set(params, "_meta", rawjson.Set(meta, key, value))
}

// TraceContext puts the bridge's own W3C trace context in params._meta
// (traceparent and tracestate, as OpenTelemetry's conventions for MCP
// carry it), replacing the agent's: the server's spans are then children of
// the bridge's call, not of the agent's span. A tracestate the agent sent
// goes when the bridge has none.
func TraceContext(params json.RawMessage, traceparent, tracestate string) json.RawMessage {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	meta := rawjson.Get(params, "_meta")
	if meta == nil {
		meta = []byte(`{}`)
	}
	meta = rawjson.Set(rawjson.Remove(meta, "tracestate"), "traceparent", rawjson.AppendString(nil, traceparent))
	if tracestate != "" {
		meta = rawjson.Set(meta, "tracestate", rawjson.AppendString(nil, tracestate))
	}
	return rawjson.Set(params, "_meta", meta)
}

// UpstreamParams are the params of a read or a prompt as they go upstream:
// without the agent's connection _meta, and without the answer to the
// bridge's own question (a 2026-07-28 retry), which is not the server's.
func UpstreamParams(params json.RawMessage) json.RawMessage {
	params = StripBridgeMeta(params)
	for _, k := range []string{"inputResponses", "requestState"} {
		if rawjson.Get(params, k) != nil {
			params = rawjson.Remove(params, k)
		}
	}
	return params
}

// WithInputResponses are the params of a call again after the server
// asked: the client's answers and the server's requestState.
func WithInputResponses(params json.RawMessage, responses map[string]json.RawMessage, state string) json.RawMessage {
	params = rawjson.Remove(rawjson.Remove(params, "inputResponses"), "requestState")
	if responses != nil {
		data, _ := json.Marshal(responses)
		params = rawjson.Set(params, "inputResponses", data)
	}
	if state != "" {
		params = rawjson.Set(params, "requestState", rawjson.AppendString(nil, state))
	}
	return params
}

// ContentURIs names the server in each contents[].uri.
func ContentURIs(res []byte, server string) []byte {
	contents := rawjson.Get(res, "contents")
	items, err := rawjson.Elements(contents)
	if err != nil {
		return res
	}
	for i, item := range items {
		if uri, ok := rawjson.String(rawjson.Get(item, "uri")); ok && uri != "" {
			items[i] = rawjson.Set(item, "uri", rawjson.AppendString(nil, BridgeURI(server, uri)))
		}
	}
	return rawjson.Set(res, "contents", rawjson.AppendArray(nil, items))
}
