package audit

import (
	"encoding/json"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/injection"
)

// Payload is the part of an event that depends on its type: one of the
// types below. Its fields are written after the common ones, in the order
// the struct declares them: the payload fields docs/audit.md defines first,
// in its order, then additions. The json tags say how a reader decodes them; a
// test checks that the Writer's encoding agrees with them.
type Payload interface {
	// EventType is the event's "type", such as "permission.requested".
	EventType() string
	// fields appends the payload's fields, each redacted.
	fields(e *fieldWriter)
}

// Ms converts a duration to the milliseconds of durationMs fields, to the
// microsecond.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// PermissionRequested records that a tools/call, resources/read or prompts/get
// reached the permission engine.
type PermissionRequested struct {
	// Tool is the canonical (dotted) namespaced name, mcp.<server>.<tool>;
	// empty for a resource or a prompt.
	Tool string `json:"tool,omitempty"`
	// Args are the call's arguments, redacted and shown as the Writer's
	// ArgsMode says.
	Args json.RawMessage `json:"args,omitempty"`
	// ArgsDigest is the digest of Args (canonjson.ArgumentsDigest), the
	// same a ToolApproval binds: written with a preview. The bridge hashes
	// a request's arguments once, for all its events; when empty, the
	// Writer hashes them.
	ArgsDigest string `json:"argumentsSha256,omitempty"`
	// RiskAtDecision is the tool's risk when the decision was taken: read,
	// write, network or destructive.
	RiskAtDecision string `json:"riskAtDecision"`
	// SourcedFrom is where the request came from: the bridge endpoint,
	// "mcp" (/mcp) or "server:<name>" (/servers/<name>/mcp).
	SourcedFrom string `json:"sourcedFrom"`
	// ToolCallID is the id of the request's events (of a read or a prompt
	// too: they name it in their own events).
	ToolCallID string `json:"toolCallId"`
	// Resource is the canonical URI of a read, mcp://<server>/<uri>.
	Resource string `json:"resource,omitempty"`
	// Prompt is the canonical name of a prompt, mcp.<server>.<prompt>.
	Prompt string `json:"prompt,omitempty"`
}

// PermissionResolved records the decision on a call. The bridge writes it, and
// checks that Write accepted it, before it forwards the call.
type PermissionResolved struct {
	// Decision is allow or deny (an ask resolves to one of them).
	Decision string `json:"decision"`
	// Actor is who decided: "policy" (the rules), "user" (an answer to an
	// elicitation) or "bridge" (no one could be asked, a timeout).
	Actor string `json:"actor"`
	// SourcedFrom names what decided: "policy:<ns>/<name>#rules[<i>]",
	// "default" (no rule matched), "approval:once", "approval:session",
	// "approval:deny", "session-grant" (allowed earlier in the session),
	// "approval:<namespace>/<name>" (a person's decision on a ToolApproval).
	SourcedFrom string `json:"sourcedFrom"`
	ToolCallID  string `json:"toolCallId"`
	// Tool, Resource, Prompt: what was decided, one of them, as in
	// PermissionRequested.
	Tool string `json:"tool,omitempty"`
	// Reason says why a call was denied (a rule's reason, or
	// approval_unavailable, approval_timeout, cel_error).
	Reason   string `json:"reason,omitempty"`
	Resource string `json:"resource,omitempty"`
	Prompt   string `json:"prompt,omitempty"`
	// Approver is the user name of the person who decided through a
	// ToolApproval (SourcedFrom is then approval:<namespace>/<name>).
	Approver string `json:"approver,omitempty"`
}

// MCPCallStarted records that the bridge sent a request upstream.
type MCPCallStarted struct {
	Server     string `json:"server"`
	ToolCallID string `json:"toolCallId"`
	// Method is the JSON-RPC method: tools/call, resources/read, prompts/get.
	Method string          `json:"method"`
	Args   json.RawMessage `json:"args,omitempty"`
	// ArgsDigest as in PermissionRequested.
	ArgsDigest string `json:"argumentsSha256,omitempty"`
	// Credential is the kind of credential the request carried to a remote
	// server: shared, exchanged or perCaller (never its value); empty
	// when it carried none of the bridge's.
	Credential string `json:"credential,omitempty"`
}

// MCPCallCompleted records that the upstream answered with a result.
type MCPCallCompleted struct {
	Server     string  `json:"server"`
	ToolCallID string  `json:"toolCallId"`
	DurationMs float64 `json:"durationMs"`
}

// MCPCallFailed records that the upstream answered with a JSON-RPC error, or
// no answer came (connection lost, deadline, server restarted).
type MCPCallFailed struct {
	Server     string  `json:"server"`
	ToolCallID string  `json:"toolCallId"`
	DurationMs float64 `json:"durationMs"`
	// Error is the error message (the upstream's, or the bridge's).
	Error string `json:"error"`
	// Code is the JSON-RPC error code when the upstream sent one.
	Code int `json:"code,omitempty"`
}

// ToolStarted records that the bridge runs a tool call the policy allowed.
type ToolStarted struct {
	Tool       string `json:"tool"`
	ToolCallID string `json:"toolCallId"`
	Server     string `json:"server"`
}

// ToolCompleted records that the agent got the tool's result (after the output
// pipeline, whose summary the extra fields carry).
type ToolCompleted struct {
	// ResultPreview is the start of the result's (redacted) text.
	ResultPreview string `json:"resultPreview"`
	// ResultSize is the size in bytes of the result the upstream returned.
	ResultSize int    `json:"resultSize"`
	ToolCallID string `json:"toolCallId"`
	Tool       string `json:"tool"`
	// IsError is the result's own isError (a tool-level failure).
	IsError bool `json:"isError,omitempty"`
	// Redactions counts the secrets the output pipeline redacted, by kind.
	Redactions map[string]int `json:"redactions,omitempty"`
	// Injection lists the injection findings in the result.
	Injection []injection.Finding `json:"injection,omitempty"`
	// Blocked says the result was withheld because of Injection.
	Blocked bool `json:"blocked,omitempty"`
	// Artifact is artifact://<sha256> when the result was over the size cap.
	Artifact string `json:"artifact,omitempty"`
}

// ToolFailed records that the call ended without a result for the agent.
type ToolFailed struct {
	// Reason is a stable code: denied, approval_unavailable,
	// approval_timeout, mcp_server_restarted, mcp_server_unstable,
	// upstream_error, timeout, cancelled, unknown_tool, schema_mismatch,
	// invalid_result, rate_limited.
	Reason     string `json:"reason"`
	ToolCallID string `json:"toolCallId"`
	// Tool, Resource, Prompt: what failed, one of them, as in
	// PermissionRequested (a read or a prompt ends its chain the way a
	// call does).
	Tool     string `json:"tool,omitempty"`
	Resource string `json:"resource,omitempty"`
	Prompt   string `json:"prompt,omitempty"`
	// Message is a human-readable detail.
	Message string `json:"message,omitempty"`
}

// ToolAmbiguousCall records that a bare tool name matched tools of several
// servers, so the call was refused (names are never guessed).
type ToolAmbiguousCall struct {
	// Tool is the name the agent sent.
	Tool string `json:"tool"`
	// Candidates are the namespaced names it could mean, sorted.
	Candidates []string `json:"candidates"`
}

// ResourceRequested records that an agent asked to read a resource.
type ResourceRequested struct {
	Server string `json:"server"`
	// URI is the upstream URI (not the rewritten one the agent used).
	URI string `json:"uri"`
	// Method is "resources/subscribe" (or subscriptions/listen) for a
	// subscription, empty for a read.
	Method string `json:"method,omitempty"`
	// ToolCallID is the id of the read's permission events.
	ToolCallID string `json:"toolCallId,omitempty"`
	// Credential is as in MCPCallStarted.
	Credential string `json:"credential,omitempty"`
}

// ResourceFetched records that a resource was read and handed to the agent.
type ResourceFetched struct {
	Server string `json:"server"`
	URI    string `json:"uri"`
	// SizeBytes is the size of the upstream's resources/read result.
	SizeBytes int `json:"sizeBytes"`
	// ContentHash is "sha256:<hex>" of that result.
	ContentHash string `json:"contentHash"`
	// Injection are the findings of the scan of what the agent gets;
	// Blocked says it was withheld for them.
	Injection  []injection.Finding `json:"injection,omitempty"`
	Blocked    bool                `json:"blocked,omitempty"`
	ToolCallID string              `json:"toolCallId,omitempty"`
}

// PromptInvoked records that an agent asked for a prompt (prompts/get).
type PromptInvoked struct {
	Server string          `json:"server"`
	Prompt string          `json:"prompt"`
	Args   json.RawMessage `json:"args,omitempty"`
	// ArgsDigest as in PermissionRequested.
	ArgsDigest string `json:"argumentsSha256,omitempty"`
	// ToolCallID is the id of the prompt's permission events.
	ToolCallID string `json:"toolCallId,omitempty"`
	// Credential is as in MCPCallStarted.
	Credential string `json:"credential,omitempty"`
}

// PromptExpanded records that the server expanded the prompt and the agent got
// it.
type PromptExpanded struct {
	Server string `json:"server"`
	Prompt string `json:"prompt"`
	// Messages is how many messages the expansion has.
	Messages   int                 `json:"messages"`
	SizeBytes  int                 `json:"sizeBytes"`
	Injection  []injection.Finding `json:"injection,omitempty"`
	Blocked    bool                `json:"blocked,omitempty"`
	ToolCallID string              `json:"toolCallId,omitempty"`
}

// ServerCrashed records that an MCP server's container exited or stopped
// answering.
type ServerCrashed struct {
	Server    string `json:"server"`
	Namespace string `json:"namespace,omitempty"`
	// Reason is why: the container's exit reason (Error, OOMKilled) or
	// ProbeFailed.
	Reason string `json:"reason"`
	// Crashes counts consecutive crashes, this one included.
	Crashes int `json:"crashes"`
}

// ServerRestarting records that the controller will start a new pod after a
// backoff.
type ServerRestarting struct {
	Server    string  `json:"server"`
	Namespace string  `json:"namespace,omitempty"`
	Attempt   int     `json:"attempt"`
	BackoffMs float64 `json:"backoffMs"`
}

// ServerPermanentlyFailed records that restarts are exhausted; the catalog is
// withdrawn.
type ServerPermanentlyFailed struct {
	Server         string `json:"server"`
	Namespace      string `json:"namespace,omitempty"`
	Restarts       int    `json:"restarts"`
	LastExitReason string `json:"lastExitReason"`
}

// ServerShutdown records that a server was suspended or deleted and unregistered.
type ServerShutdown struct {
	Server    string `json:"server"`
	Namespace string `json:"namespace,omitempty"`
	// Reason is suspend or delete.
	Reason string `json:"reason"`
}

// ServerRequest records that during a call, the server sent a request of its
// own to the client of the agent that made the call (elicitation, sampling);
// the bridge relayed it or refused it. One event per request, when it is
// settled.
type ServerRequest struct {
	Server     string `json:"server"`
	ToolCallID string `json:"toolCallId"`
	Method     string `json:"method"`
	// Outcome is the client's answer (accept, decline or cancel for an
	// elicitation, answered for sampling), or error, refused, timeout.
	Outcome string `json:"outcome"`
	// Reason says why a request was refused or got no answer.
	Reason string `json:"reason,omitempty"`
	// Injection are the scan's findings in the request's text.
	Injection []injection.Finding `json:"injection,omitempty"`
}

// Dropped is written by the Writer itself, when buffer space returns after
// it had to drop events: how many it dropped.
type Dropped struct {
	Count uint64 `json:"count"`
}

func (PermissionRequested) EventType() string     { return "permission.requested" }
func (PermissionResolved) EventType() string      { return "permission.resolved" }
func (MCPCallStarted) EventType() string          { return "mcp.call.started" }
func (MCPCallCompleted) EventType() string        { return "mcp.call.completed" }
func (MCPCallFailed) EventType() string           { return "mcp.call.failed" }
func (ToolStarted) EventType() string             { return "tool.started" }
func (ToolCompleted) EventType() string           { return "tool.completed" }
func (ToolFailed) EventType() string              { return "tool.failed" }
func (ToolAmbiguousCall) EventType() string       { return "tool.ambiguous_call" }
func (ResourceRequested) EventType() string       { return "mcp.resource.requested" }
func (ResourceFetched) EventType() string         { return "mcp.resource.fetched" }
func (PromptInvoked) EventType() string           { return "mcp.prompt.invoked" }
func (PromptExpanded) EventType() string          { return "mcp.prompt.expanded" }
func (ServerCrashed) EventType() string           { return "mcp.server.crashed" }
func (ServerRestarting) EventType() string        { return "mcp.server.restarting" }
func (ServerPermanentlyFailed) EventType() string { return "mcp.server.permanently_failed" }
func (ServerShutdown) EventType() string          { return "mcp.server.shutdown" }
func (ServerRequest) EventType() string           { return "mcp.server_request" }
func (Dropped) EventType() string                 { return "audit.dropped" }

func (p PermissionRequested) fields(e *fieldWriter) {
	e.strOmitEmpty("tool", p.Tool)
	e.args(p.Args, p.ArgsDigest)
	e.str("riskAtDecision", p.RiskAtDecision)
	e.str("sourcedFrom", p.SourcedFrom)
	e.str("toolCallId", p.ToolCallID)
	e.strOmitEmpty("resource", p.Resource)
	e.strOmitEmpty("prompt", p.Prompt)
}

func (p PermissionResolved) fields(e *fieldWriter) {
	e.str("decision", p.Decision)
	e.str("actor", p.Actor)
	e.str("sourcedFrom", p.SourcedFrom)
	e.str("toolCallId", p.ToolCallID)
	e.strOmitEmpty("tool", p.Tool)
	e.strOmitEmpty("reason", p.Reason)
	e.strOmitEmpty("resource", p.Resource)
	e.strOmitEmpty("prompt", p.Prompt)
	e.strOmitEmpty("approver", p.Approver)
}

func (p MCPCallStarted) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.str("toolCallId", p.ToolCallID)
	e.str("method", p.Method)
	e.args(p.Args, p.ArgsDigest)
	if p.Credential != "" {
		e.str("credential", p.Credential)
	}
}

func (p MCPCallCompleted) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.str("toolCallId", p.ToolCallID)
	e.float("durationMs", p.DurationMs)
}

func (p MCPCallFailed) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.str("toolCallId", p.ToolCallID)
	e.float("durationMs", p.DurationMs)
	e.str("error", p.Error)
	if p.Code != 0 {
		e.int("code", int64(p.Code))
	}
}

func (p ToolStarted) fields(e *fieldWriter) {
	e.str("tool", p.Tool)
	e.str("toolCallId", p.ToolCallID)
	e.str("server", p.Server)
}

func (p ToolCompleted) fields(e *fieldWriter) {
	e.str("resultPreview", p.ResultPreview)
	e.int("resultSize", int64(p.ResultSize))
	e.str("toolCallId", p.ToolCallID)
	e.str("tool", p.Tool)
	e.boolOmitFalse("isError", p.IsError)
	e.counts("redactions", p.Redactions)
	e.findings("injection", p.Injection)
	e.boolOmitFalse("blocked", p.Blocked)
	e.strOmitEmpty("artifact", p.Artifact)
}

func (p ToolFailed) fields(e *fieldWriter) {
	e.str("reason", p.Reason)
	e.str("toolCallId", p.ToolCallID)
	e.strOmitEmpty("tool", p.Tool)
	e.strOmitEmpty("resource", p.Resource)
	e.strOmitEmpty("prompt", p.Prompt)
	e.strOmitEmpty("message", p.Message)
}

func (p ToolAmbiguousCall) fields(e *fieldWriter) {
	e.str("tool", p.Tool)
	e.strs("candidates", p.Candidates)
}

func (p ResourceRequested) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.str("uri", p.URI)
	e.strOmitEmpty("method", p.Method)
	e.strOmitEmpty("toolCallId", p.ToolCallID)
	e.strOmitEmpty("credential", p.Credential)
}

func (p ServerRequest) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.str("toolCallId", p.ToolCallID)
	e.str("method", p.Method)
	e.str("outcome", p.Outcome)
	e.strOmitEmpty("reason", p.Reason)
	e.findings("injection", p.Injection)
}

func (p ResourceFetched) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.str("uri", p.URI)
	e.int("sizeBytes", int64(p.SizeBytes))
	e.str("contentHash", p.ContentHash)
	e.findings("injection", p.Injection)
	e.boolOmitFalse("blocked", p.Blocked)
	e.strOmitEmpty("toolCallId", p.ToolCallID)
}

func (p PromptInvoked) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.str("prompt", p.Prompt)
	e.args(p.Args, p.ArgsDigest)
	e.strOmitEmpty("toolCallId", p.ToolCallID)
	e.strOmitEmpty("credential", p.Credential)
}

func (p PromptExpanded) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.str("prompt", p.Prompt)
	e.int("messages", int64(p.Messages))
	e.int("sizeBytes", int64(p.SizeBytes))
	e.findings("injection", p.Injection)
	e.boolOmitFalse("blocked", p.Blocked)
	e.strOmitEmpty("toolCallId", p.ToolCallID)
}

func (p ServerCrashed) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.strOmitEmpty("namespace", p.Namespace)
	e.str("reason", p.Reason)
	e.int("crashes", int64(p.Crashes))
}

func (p ServerRestarting) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.strOmitEmpty("namespace", p.Namespace)
	e.int("attempt", int64(p.Attempt))
	e.float("backoffMs", p.BackoffMs)
}

func (p ServerPermanentlyFailed) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.strOmitEmpty("namespace", p.Namespace)
	e.int("restarts", int64(p.Restarts))
	e.str("lastExitReason", p.LastExitReason)
}

func (p ServerShutdown) fields(e *fieldWriter) {
	e.str("server", p.Server)
	e.strOmitEmpty("namespace", p.Namespace)
	e.str("reason", p.Reason)
}

func (p Dropped) fields(e *fieldWriter) { e.uint("count", p.Count) }
