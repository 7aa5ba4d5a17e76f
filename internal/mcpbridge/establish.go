package mcpbridge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/protocol"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Meta keys of the stateless revision's per-request _meta.
const (
	metaProtocolVersion    = protocol.MetaProtocolVersion
	metaClientCapabilities = protocol.MetaClientCapabilities
	metaServerInfo         = protocol.MetaServerInfo
	metaLogLevel           = protocol.MetaLogLevel
)

// establish finds the request's era and session. It writes the error and
// returns false when the request cannot go on.
func (b *Bridge) establish(w http.ResponseWriter, r *http.Request, rq *request) bool {
	msg := rq.msg
	headerVersion := r.Header.Get("MCP-Protocol-Version")
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		sess, err := b.cfg.Sessions.Resume(sid, rq.id.Username, rq.endpoint)
		if err != nil {
			writeError(w, http.StatusNotFound, msg.ID, jsonrpc.CodeInvalidRequest, "session not found: start a new one with initialize")
			return false
		}
		// Clients send the negotiated version; some send an older one they
		// also speak (as the conformance suite does), which is harmless.
		if headerVersion != "" && !slices.Contains(client.LegacyVersions, headerVersion) {
			writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest, fmt.Sprintf("MCP-Protocol-Version %q is not a version of this session's era (the session speaks %q)", headerVersion, sess.Version))
			return false
		}
		rq.sess, rq.version, rq.elicitation = sess, sess.Version, sess.Elicitation
		rq.elicitationURL, rq.sampling = sess.ElicitationURL, sess.Sampling
		return true
	}
	if msg.Method == "initialize" {
		return true
	}
	metaVersion, caps := requestMeta(msg.Params)
	if headerVersion < client.StatelessVersion && metaVersion == "" && msg.Method != "server/discover" {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest, "no Mcp-Session-Id: send initialize first, or speak protocol version "+client.StatelessVersion)
		return false
	}
	if headerVersion != "" && headerVersion != client.StatelessVersion && headerVersion >= client.StatelessVersion {
		data, _ := json.Marshal(map[string]any{"supported": []string{client.StatelessVersion}, "requested": headerVersion})
		writeErrorData(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeUnsupportedProtocolVersion, "unsupported protocol version "+strconv.Quote(headerVersion), data)
		return false
	}
	if msg.IsRequest() && msg.Method != "server/discover" {
		switch {
		case headerVersion == "":
			writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeHeaderMismatch, "MCP-Protocol-Version header is required for requests carrying "+metaProtocolVersion)
			return false
		case metaVersion == "":
			writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidParams, "missing or invalid _meta field "+metaProtocolVersion)
			return false
		case metaVersion != headerVersion:
			writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeHeaderMismatch, fmt.Sprintf("MCP-Protocol-Version header %q does not match %s %q", headerVersion, metaProtocolVersion, metaVersion))
			return false
		}
	}
	if h := r.Header.Get(protocol.HeaderMethod); h != "" && h != msg.Method {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeHeaderMismatch, fmt.Sprintf("Mcp-Method header %q does not match the method %q", h, msg.Method))
		return false
	}
	if h := r.Header.Get(protocol.HeaderName); h != "" && h != protocol.RequestName(msg.Method, msg.Params) {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeHeaderMismatch, fmt.Sprintf("Mcp-Name header %q does not match the request", h))
		return false
	}
	rq.stateless, rq.version = true, client.StatelessVersion
	rq.elicitation = hasFormElicitation(rawjson.Get(caps, "elicitation"))
	rq.elicitationURL = hasURLElicitation(rawjson.Get(caps, "elicitation"))
	rq.sampling = declared(rawjson.Get(caps, "sampling"))
	return true
}

// requestMeta reads the stateless revision's _meta: the protocol version
// and the client capabilities.
func requestMeta(params json.RawMessage) (version string, caps json.RawMessage) {
	if len(params) == 0 {
		return "", nil
	}
	meta := rawjson.Get(params, "_meta")
	if meta == nil {
		return "", nil
	}
	if v := rawjson.Get(meta, metaProtocolVersion); v != nil {
		version, _ = rawjson.String(v)
	}
	return version, rawjson.Get(meta, metaClientCapabilities)
}

// hasURLElicitation reads capabilities.elicitation: URL mode must be listed.
func hasURLElicitation(raw json.RawMessage) bool {
	return declared(rawjson.Get(raw, "url"))
}

// declared: a capability is declared by an object, even an empty one.
func declared(raw json.RawMessage) bool {
	return len(raw) > 0 && raw[0] == '{'
}

// hasFormElicitation reads capabilities.elicitation: an empty object means
// form mode (as before modes existed); otherwise "form" must be listed.
func hasFormElicitation(raw json.RawMessage) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return false
	}
	ms, err := rawjson.Members(raw)
	if err != nil {
		return false
	}
	if len(ms) == 0 {
		return true
	}
	for _, m := range ms {
		if m.Key == "form" {
			return true
		}
	}
	return false
}
