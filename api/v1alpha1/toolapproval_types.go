package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApprovalVerdict is a person's answer to a ToolApproval.
// +kubebuilder:validation:Enum=AllowOnce;AllowSession;Deny
type ApprovalVerdict string

const (
	// VerdictAllowOnce lets the one request the ToolApproval is bound to go
	// through.
	VerdictAllowOnce ApprovalVerdict = "AllowOnce"
	// VerdictAllowSession lets the request through and answers the same
	// question for the rest of the agent's session (offered only when the
	// agent has a session and the policy allows it).
	VerdictAllowSession ApprovalVerdict = "AllowSession"
	// VerdictDeny refuses the request (reason denied_by_approver).
	VerdictDeny ApprovalVerdict = "Deny"
)

// ApprovalPhase is where a ToolApproval stands.
// +kubebuilder:validation:Enum=Pending;Approved;Denied;Expired;Cancelled
type ApprovalPhase string

const (
	// ApprovalPending means the request waits for a person.
	ApprovalPending ApprovalPhase = "Pending"
	// ApprovalApproved means a person allowed it and the bridge let it through.
	ApprovalApproved ApprovalPhase = "Approved"
	// ApprovalDenied means a person denied it.
	ApprovalDenied ApprovalPhase = "Denied"
	// ApprovalExpired means nobody decided before spec.request.expiresAt.
	ApprovalExpired ApprovalPhase = "Expired"
	// ApprovalCancelled means the agent went away (its request ended) before a
	// decision.
	ApprovalCancelled ApprovalPhase = "Cancelled"
)

// ApprovalRequester is the identity that made the request, as the bridge
// authenticated it.
type ApprovalRequester struct {
	// username as TokenReview reported it, e.g.
	// system:serviceaccount:agents:planner.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Username string `json:"username"`

	// groups the identity belongs to.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Groups []string `json:"groups,omitempty"`

	// session is the agent's MCP session, when it has one, as audit events
	// name it (not the Mcp-Session-Id the agent sends, which carries it
	// sealed).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Session string `json:"session,omitempty"`
}

// ApprovalRequest is the exact request a ToolApproval is about. The bridge
// lets a request through only if its caller, method, target and sha256 of
// its arguments equal these: other arguments or another caller need another
// approval.
type ApprovalRequest struct {
	// requester is who asks.
	// +required
	Requester ApprovalRequester `json:"requester"`

	// method is tools/call, resources/read or prompts/get.
	// +required
	// +kubebuilder:validation:Enum="tools/call";"resources/read";"prompts/get"
	Method string `json:"method"`

	// server is the MCPServer the request goes to (in this namespace).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Server string `json:"server"`

	// target is what the request is about: the tool's or prompt's namespaced
	// name (mcp.<server>.<name>) or the resource's URI.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Target string `json:"target"`

	// argumentsSHA256 is the sha256 of the request's arguments in canonical
	// JSON (sha256:<hex>, as audit events write digests); empty for a
	// resource read.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	ArgumentsSHA256 string `json:"argumentsSHA256,omitempty"`

	// argumentsPreview shows the arguments to the person deciding, with
	// secrets redacted as in audit events, cut to 2,048 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ArgumentsPreview string `json:"argumentsPreview,omitempty"`

	// risk of the request at the decision.
	// +required
	Risk Risk `json:"risk"`

	// rules that asked, in sourcedFrom form
	// (policy:<namespace>/<name>#rules[i]).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	Rules []string `json:"rules,omitempty"`

	// reason the rules gave for asking.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`

	// modes a person may approve with; Deny is always possible.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	Modes []ApprovalMode `json:"modes"`

	// toolCallId is the id of the request in the audit events, so that one
	// can go from the approval to the call's events and back.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ToolCallID string `json:"toolCallId,omitempty"`

	// expiresAt is when the request stops waiting: with no decision by then
	// it is denied (reason approval_timeout).
	// +required
	ExpiresAt metav1.Time `json:"expiresAt"`
}

// ApprovalDecision is a person's answer. The admission policy shipped with
// the operator sets it apart from every other field: it can be set once,
// only by the user named in decider, and never by the requester.
type ApprovalDecision struct {
	// verdict: AllowOnce, AllowSession (one of spec.request.modes) or Deny.
	// +required
	Verdict ApprovalVerdict `json:"verdict"`

	// decider is the user name of the person deciding; the admission policy
	// refuses any other value than the name the API server authenticated.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Decider string `json:"decider"`

	// comment for the audit trail and the requester.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Comment string `json:"comment,omitempty"`
}

// ToolApprovalSpec is the request (written by the bridge, immutable) and, once
// a person decided, the decision.
//
// +kubebuilder:validation:XValidation:rule="!has(self.decision) || self.decision.verdict == 'Deny' || self.decision.verdict in self.request.modes",message="decision.verdict must be Deny or one of request.modes"
type ToolApprovalSpec struct {
	// request is what waits for a decision.
	// +required
	Request ApprovalRequest `json:"request"`

	// decision is set by the person who decides (kubectl mcp approve/deny).
	// +optional
	Decision *ApprovalDecision `json:"decision,omitempty"`
}

// ToolApprovalStatus is what became of the request, written by the bridge
// (or, for a request whose bridge went away, the controller).
type ToolApprovalStatus struct {
	// phase: Pending, Approved, Denied, Expired or Cancelled.
	// +optional
	Phase ApprovalPhase `json:"phase,omitempty"`

	// message says what happened, for people.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// finishedAt is when the phase left Pending; the approval is deleted a
	// retention period after it.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// ToolApproval is one request of an agent that waits for a person: the
// bridge creates it when a ToolPolicy rule says ask and the request cannot
// (or, by the policy, should not) be put to the agent's own client.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ta,categories=mcp
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Requester",type=string,JSONPath=`.spec.request.requester.username`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.request.target`
// +kubebuilder:printcolumn:name="Risk",type=string,JSONPath=`.spec.request.risk`
// +kubebuilder:printcolumn:name="Decider",type=string,JSONPath=`.spec.decision.decider`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.request.expiresAt`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ToolApproval struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the request and its decision.
	// +required
	Spec ToolApprovalSpec `json:"spec"`

	// status is what became of it.
	// +optional
	Status ToolApprovalStatus `json:"status,omitzero"`
}

// ToolApprovalList is a list of ToolApprovals.
// +kubebuilder:object:root=true
type ToolApprovalList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []ToolApproval `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ToolApproval{}, &ToolApprovalList{})
}
