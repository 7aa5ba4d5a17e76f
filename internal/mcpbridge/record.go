package mcpbridge

import (
	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
)

// Reasons of tool.failed the bridge gives itself (upstream reasons are in
// package upstream).
const (
	reasonDenied              = "denied"
	reasonApprovalUnavailable = "approval_unavailable"
	reasonApprovalTimeout     = "approval_timeout"
	reasonRateLimited         = "rate_limited"
	reasonUpstreamError       = "upstream_error"
	reasonAudit               = "audit_unavailable"
	// reasonInvalidResult: the server's answer could not be passed on.
	reasonInvalidResult = upstream.ReasonInvalid
	// reasonInjection: a prompt or resource was withheld because its text
	// looks like instructions to the model (a tool result is replaced by an
	// error result instead, which says so).
	reasonInjection = "injection_blocked"
	// reasonServerRequestRefused: the server asked for input (an
	// input_required result) the bridge may not pass to the agent.
	reasonServerRequestRefused = "server_request_refused"
)

func (b *Bridge) audit(rq *request, p audit.Payload) (uint64, error) {
	return b.cfg.Audit.WriteTraced(rq.sessionID(), rq.id.Username, rq.traceIDs(), p)
}

// countToolCall counts a tool call's end in the calls metric, by its
// server, tool (nil: a name no tool answers to), decision and outcome.
func (b *Bridge) countToolCall(t *routes.Tool, decision v1alpha1.Decision, outcome string) {
	if b.cfg.Metrics == nil {
		return
	}
	server, name := "", "unknown"
	if t != nil {
		server, name = t.Server.Name, t.Name
	}
	b.cfg.Metrics.Calls.WithLabelValues(server, name, string(decision), outcome).Inc()
}
