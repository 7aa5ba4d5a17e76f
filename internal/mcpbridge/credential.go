package mcpbridge

import (
	"errors"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstreamcred"
)

// The upstream-credential stage: after the decision, before the request
// goes upstream, it picks what the call carries to a remote server. The
// shared credential (spec.remote.auth.bearerTokenSecretRef) rides on the
// server's own connection, as the bridge's listings do. An exchanged token
// or the caller's own Secret rides on a connection of the caller's alone
// (routes/callers.go): the stage gets the credential (upstreamcred), puts
// it in the request's context, and the forward stage sends on that
// connection. A credential the caller cannot have ends the request there:
// nothing is forwarded, and the shared credential is never sent in its
// place.
//
// The caller's own bearer token (request.token) is only the subject of an
// exchange; it is sent to the token endpoint, never to a server.

// spanCredential is the stage's span, when tracing is on.
const spanCredential = "credential"

// attrCredential is the kind of credential a call carried upstream
// (upstreamcred.Kind), on the credential and forward spans.
const attrCredential = "mcp_operator.credential"

// credential runs the stage for x; an answer ends the request. x.conn is
// then the caller's own connection where the credential is per caller.
func (b *Bridge) credential(x *exchange) *jsonrpc.Message {
	if !x.picksCredential() {
		return nil
	}
	s := x.server
	x.credKind = upstreamcred.KindOf(s.Remote)
	if !x.callersOwnCredential() {
		return nil
	}
	rq := x.rq
	if b.cfg.Credentials == nil {
		return b.credentialFailed(x, &upstreamcred.Error{Server: s.Key(), Reason: upstreamcred.ReasonUnavailable, Msg: "server " + s.Key() + " takes each caller's own credential, and this bridge reads none"})
	}
	if rq.id.Kind == identity.Anonymous {
		// No token was checked (--insecure-anonymous): there is no caller
		// whose credential this could be, and a token the request carries
		// is nobody's verified token to exchange.
		return b.credentialFailed(x, &upstreamcred.Error{Server: s.Key(), Reason: upstreamcred.ReasonMissing, Msg: "server " + s.Key() + " takes each caller's own credential, and an anonymous caller (a bridge run with --insecure-anonymous) has none"})
	}
	cred, err := b.cfg.Credentials.Credential(rq.ctx, upstreamcred.Server{Namespace: s.Namespace, Name: s.Name, Remote: s.Remote},
		upstreamcred.Caller{Username: rq.id.Username, Token: rq.token}, rq.sessionID())
	if err != nil {
		return b.credentialFailed(x, err)
	}
	if rq.sess != nil {
		b.forgetAtEnd(rq)
	}
	cc, ok := b.cfg.Registry.CallerConn(s.Name, rq.id.Username)
	if !ok {
		return b.callFailed(x, s, 0, &notSentError{&upstream.Error{Reason: upstream.ReasonUnavailable, Err: errors.New("the server left the bridge's scope")}})
	}
	// The credential rides on the request's context, not the connection:
	// concurrent calls of one caller with different tokens each carry
	// their own exchange.
	rq.ctx = cc.WithCredential(rq.ctx, cred.Header)
	x.conn = cc.Conn
	return nil
}

// picksCredential says whether the stage picks what x carries upstream:
// not for a parked call's retry (it continues on the connection it started
// on), nor for a subscription (held on the server's own connection).
func (x *exchange) picksCredential() bool {
	return x.server != nil && x.parked == nil && !x.subscription
}

// callersOwnCredential says whether x carries its caller's own credential
// upstream, which the stage gets (in a span of its own).
func (x *exchange) callersOwnCredential() bool {
	return x.picksCredential() && upstreamcred.OwnPerCaller(x.server.Remote)
}

// forgetAtEnd has the credentials of rq's session forgotten when it ends
// (once per session on this replica).
func (b *Bridge) forgetAtEnd(rq *request) {
	id := rq.sess.ID
	if _, loaded := b.credSessions.LoadOrStore(id, struct{}{}); loaded {
		return
	}
	if _, ok := rq.sess.AtEnd(func() {
		b.cfg.Credentials.Forget(id)
		b.credSessions.Delete(id)
	}); !ok {
		b.cfg.Credentials.Forget(id)
		b.credSessions.Delete(id)
	}
}

// credentialFailed ends x, whose credential could not be had: tool.failed
// with the reason (credential_missing, token_exchange_failed,
// credential_unavailable) and an error that names the server and, for a
// refused exchange, the token endpoint's error code.
func (b *Bridge) credentialFailed(x *exchange, err error) *jsonrpc.Message {
	reason, data := upstreamcred.ReasonUnavailable, map[string]any{"toolCallId": x.id, "server": x.server.Name, "credential": string(x.credKind)}
	var ce *upstreamcred.Error
	if errors.As(err, &ce) {
		reason = ce.Reason
		if ce.Code != "" {
			data["error"] = ce.Code
		}
	}
	data["reason"] = reason
	msg, _ := output.Text(b.redactor(x.server), "error.message", err.Error())
	_, _ = b.audit(x.rq, x.failed(reason, msg))
	b.countRequest(x, v1alpha1.DecisionAllow, reason)
	x.traceFailure(reason)
	// Nothing went upstream. A credential that could not be had for now
	// (the API server or the token endpoint not reached or not answering)
	// may be had next time; anything else is refused the same until
	// someone changes it: a credential the caller lacks, an exchange the
	// authorization server refused, the server's exchange set up wrong
	// (its token URL, its client Secret), or a bridge that reads no
	// credentials.
	hint := retryNever
	if ce != nil && ce.Transient {
		hint = retryAnytime
	}
	return rpcError(x.rq, CodeUpstream, x.what+" not sent upstream: "+msg+"; "+hint.advice(), hint.with(data))
}

// callConn is the connection x goes upstream on: the caller's own where
// the credential stage chose one, else conn, the server's.
func (x *exchange) callConn(conn upstreamConn) upstreamConn {
	if x.conn != nil {
		return x.conn
	}
	return conn
}
