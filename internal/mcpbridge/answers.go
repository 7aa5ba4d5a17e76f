package mcpbridge

import (
	"encoding/json"
	"net/http"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

// Bridge-specific JSON-RPC error codes (docs/bridge.md); the standard
// and MCP ones are jsonrpc's.
const (
	// CodeDenied: the permission engine (or the user) refused the request.
	CodeDenied = -32010
	// CodeUpstream: the server gave no answer (restarted, unstable,
	// unavailable, timeout, malformed answer).
	CodeUpstream = -32011
	// CodeServerAway answers a request for a server that is not serving now
	// (restarting, starting, asleep and not woken in time, failed): its data
	// says the server's Ready reason and whether and when to retry.
	CodeServerAway = -32012
)

func writeError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	writeErrorData(w, status, id, code, msg, nil)
}

func writeErrorData(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data json.RawMessage) {
	resp := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Error: &jsonrpc.Error{Code: code, Message: msg, Data: data}}
	if id == nil {
		resp.ID = json.RawMessage("null")
	}
	body, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// rpcError is an error answer to rq.
func rpcError(rq *request, code int, msg string, data any) *jsonrpc.Message {
	resp := jsonrpc.NewErrorResponse(rq.msg.ID, code, msg)
	if data != nil {
		resp.Error.Data, _ = json.Marshal(data)
	}
	return resp
}

// rpcResult is a result answer to rq.
func rpcResult(rq *request, v any) *jsonrpc.Message {
	if raw, ok := v.(json.RawMessage); ok {
		return jsonrpc.NewResult(rq.msg.ID, raw)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return rpcError(rq, jsonrpc.CodeInternalError, "the bridge could not encode its answer", nil)
	}
	return jsonrpc.NewResult(rq.msg.ID, data)
}
