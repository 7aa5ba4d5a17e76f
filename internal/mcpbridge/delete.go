package mcpbridge

import (
	"net/http"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
)

// delete ends the session a DELETE names. Both paths end it with
// Sessions.EndToken, which does not adopt a session live on another
// replica: it writes this replica's tombstone only, so a DELETE never
// counts against the caller's session cap here or forgets another of its
// sessions (the other replica keeps its copy until it idles out or
// MaxAge, as docs/bridge.md "Sessions and replicas" says of any DELETE).
func (b *Bridge) delete(w http.ResponseWriter, r *http.Request, endpoint string) {
	sid := r.Header.Get("Mcp-Session-Id")
	// An empty Authorization header is taken as none.
	if r.Header.Get("Authorization") == "" {
		if subject, err := b.cfg.Sessions.Subject(sid); err == nil {
			b.deleteByID(w, r, sid, subject, endpoint)
			return
		}
		// Not a sealed id of ours: 401 below, as for any request without
		// credentials.
	}
	id, ok := b.authenticate(w, r)
	if !ok {
		return
	}
	if _, err := b.cfg.Sessions.EndToken(sid, id.Username, endpoint, session.ErrEnded); err != nil {
		writeError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteByID serves a DELETE without credentials of a sealed session id:
// it ends that session, for the identity sealed in it. The id is the
// bridge's sealed secret, known to the client it was issued to. mcp-go's
// Streamable HTTP client (v1.2) sends its DELETE without the headers it
// sends on every other request (WithHTTPHeaders, WithHTTPHeaderFunc,
// OAuth): refused, its sessions would stay until they idle out, each
// counted against MaxPerSubject, and then the caller could open no more.
// What ends is told so (session.ErrEndedByID) and logged with where the
// DELETE came from: a stolen id can end a session too.
func (b *Bridge) deleteByID(w http.ResponseWriter, r *http.Request, sid, subject, endpoint string) {
	ended, err := b.cfg.Sessions.EndToken(sid, subject, endpoint, session.ErrEndedByID)
	if err != nil {
		writeError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found")
		return
	}
	b.cfg.Log.Info("a DELETE without credentials ended a session by its id", "session", ended, "subject", subject, "endpoint", endpoint, "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
}
