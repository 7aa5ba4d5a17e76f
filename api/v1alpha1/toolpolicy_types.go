package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SubjectKind is the kind of identity a ToolPolicy applies to.
// +kubebuilder:validation:Enum=ServiceAccount;User;Group
type SubjectKind string

const (
	// SubjectServiceAccount is a Kubernetes ServiceAccount, named with its namespace.
	SubjectServiceAccount SubjectKind = "ServiceAccount"
	// SubjectUser is a user name as the API server's TokenReview reports it.
	SubjectUser SubjectKind = "User"
	// SubjectGroup is a group, such as system:serviceaccounts:<namespace>.
	SubjectGroup SubjectKind = "Group"
)

// ApprovalMode is a choice the bridge offers when a rule says ask.
// +kubebuilder:validation:Enum=AllowOnce;AllowSession
type ApprovalMode string

const (
	// ApprovalAllowOnce approves one call.
	ApprovalAllowOnce ApprovalMode = "AllowOnce"
	// ApprovalAllowSession approves the tool for the rest of the session.
	ApprovalAllowSession ApprovalMode = "AllowSession"
)

// ApprovalChannel is a way the bridge can put an ask to a person.
// +kubebuilder:validation:Enum=Elicitation;ToolApproval
type ApprovalChannel string

const (
	// ChannelElicitation asks through the agent's own MCP client (form
	// elicitation), when the client offers it.
	ChannelElicitation ApprovalChannel = "Elicitation"
	// ChannelToolApproval creates a ToolApproval in the server's namespace
	// and waits until a person decides it (kubectl mcp approve/deny) or it
	// expires.
	ChannelToolApproval ApprovalChannel = "ToolApproval"
)

// InjectionAction is what the bridge does with a tool result or prompt
// expansion whose text its injection scan flags (text that looks like
// instructions to the model).
// +kubebuilder:validation:Enum=Flag;Block
type InjectionAction string

const (
	// InjectionFlag records the findings in the audit event and passes the
	// result on.
	InjectionFlag InjectionAction = "Flag"
	// InjectionBlock records the findings and withholds the result: the agent
	// gets an error result (a tool) or an error (a prompt) naming the patterns
	// found instead.
	InjectionBlock InjectionAction = "Block"
)

// ToolPolicy condition reasons.
const (
	// ReasonCompiled: every rule compiled; the policy is in force.
	ReasonCompiled = "Compiled"
	// ReasonInvalid: a rule did not compile; the policy is not in force, so
	// its subjects get the default (deny) from it.
	ReasonInvalid = "Invalid"
)

// ConditionWarnings is True when the policy compiled but something in it is
// probably not what its author meant (a prefix test on a raw path, an allow
// that cannot allow the destructive tools it reaches, a rule that matches no
// published tool); the message lists each with how to write it safely. A
// policy with warnings is in force all the same: see Ready.
const ConditionWarnings = "Warnings"

// Warnings condition reasons.
const (
	// ReasonHasWarnings: the lints found something; the message lists it.
	ReasonHasWarnings = "HasWarnings"
	// ReasonNoWarnings: the lints found nothing.
	ReasonNoWarnings = "NoWarnings"
)

// ToolPolicySpec says which subjects may use which tools, resources and prompts
// of the MCP servers in the policy's namespace.
//
// +kubebuilder:validation:XValidation:rule="has(self.rules) || has(self.resources) || has(self.prompts) || has(self.skills)",message="a ToolPolicy needs at least one of rules, resources, prompts or skills"
type ToolPolicySpec struct {
	// subjects the policy applies to. They may come from any namespace.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Subjects []Subject `json:"subjects"`

	// rules decide tool calls. Every rule that matches a call counts and the
	// most restrictive decision wins (deny over ask over allow); a call no rule
	// matches is denied; a destructive tool is at most asked, never allowed.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	Rules []ToolRule `json:"rules,omitempty"`

	// resources decide resources/read (risk read).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Resources []ResourceRule `json:"resources,omitempty"`

	// prompts decide prompts/get.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Prompts []PromptRule `json:"prompts,omitempty"`

	// skills decide which skills (the skills extension) a subject may list
	// and fetch: skills/list, skills/get and resources/read of their files.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Skills []SkillRule `json:"skills,omitempty"`

	// approval configures the question asked when a rule says ask.
	// +optional
	// +kubebuilder:default={}
	Approval ApprovalSpec `json:"approval,omitzero"`

	// rateLimit caps the calls each subject makes.
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
}

// Subject is an identity a policy applies to.
//
// +kubebuilder:validation:XValidation:rule="self.kind != 'ServiceAccount' || has(self.__namespace__)",message="a ServiceAccount subject needs its namespace"
// +kubebuilder:validation:XValidation:rule="self.kind == 'ServiceAccount' || !has(self.__namespace__)",message="namespace is only for ServiceAccount subjects"
type Subject struct {
	// kind of the subject: ServiceAccount, User or Group.
	// +required
	Kind SubjectKind `json:"kind"`

	// name of the ServiceAccount, user or group.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace of a ServiceAccount subject.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
}

// ToolRule decides calls of the tools it matches.
//
// +kubebuilder:validation:XValidation:rule="has(self.tools) || has(self.risks)",message="a rule needs tools, risks or both to say what it matches"
type ToolRule struct {
	// tools are globs on namespaced tool names (mcp.<server>.<tool>): `*`
	// matches within one name segment (no dots), `**` matches across
	// segments, `?` matches one character. Example: mcp.github.* or mcp.**.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	Tools []string `json:"tools,omitempty"`

	// risks the rule matches; with tools set, a tool must match both.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	Risks []Risk `json:"risks,omitempty"`

	// decision for the calls the rule matches: allow, deny or ask.
	// +required
	Decision Decision `json:"decision"`

	// when is a CEL condition; the rule matches only calls for which it is
	// true. It sees args (the call's arguments), tool (name, server, risk,
	// annotations) and subject (kind, name, namespace, groups). An error at
	// call time denies the call.
	// Example: path.clean(args.path).startsWith('/data/')
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	When string `json:"when,omitempty"`

	// reason is shown to the caller and written to the audit log when the rule
	// decides a call.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`

	// injection is what happens to a result of the calls the rule matches
	// when the bridge's injection scan flags its text: Flag (the default)
	// records the findings in the tool.completed event and passes the result
	// on; Block records them and withholds the result, so the agent gets an
	// error result naming the patterns found. The most protective setting
	// wins: if any rule that matches the call (of any policy for the caller)
	// says Block, the result is withheld, whichever rule gave the decision.
	// The bridge's --block-injection flag blocks on every call regardless.
	// +optional
	// +kubebuilder:default=Flag
	Injection InjectionAction `json:"injection,omitempty"`
}

// ResourceRule decides resources/read of the resources it matches.
type ResourceRule struct {
	// servers are globs on MCPServer names.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Servers []string `json:"servers"`

	// uris are globs on the resources' upstream URIs; unset matches every URI.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=2048
	URIs []string `json:"uris,omitempty"`

	// decision for the reads the rule matches.
	// +required
	Decision Decision `json:"decision"`
}

// PromptRule decides prompts/get of the prompts it matches.
type PromptRule struct {
	// prompts are globs on namespaced prompt names (mcp.<server>.<prompt>).
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	Prompts []string `json:"prompts"`

	// decision for the prompts the rule matches.
	// +required
	Decision Decision `json:"decision"`

	// injection is what happens to an expansion of the prompts the rule
	// matches when the bridge's injection scan flags its messages: Flag (the
	// default) records the findings in the mcp.prompt.expanded event and
	// passes the messages on; Block records them and withholds the
	// expansion, so the agent gets an error naming the patterns found. As
	// for tool rules, any matching rule that says Block blocks.
	// +optional
	// +kubebuilder:default=Flag
	Injection InjectionAction `json:"injection,omitempty"`
}

// SkillRule decides the skills it matches.
type SkillRule struct {
	// skills are globs on namespaced skill names: mcp.<server>.<skill path>,
	// the path's '/' written '.' (mcp.billing.acme.billing.refunds).
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	Skills []string `json:"skills"`

	// decision for the skills the rule matches: allow or deny (a skill is
	// loaded by an agent's host, which has no call to hold for a question).
	// +required
	// +kubebuilder:validation:XValidation:rule="self != 'ask'",message="a skill rule decides allow or deny, not ask"
	Decision Decision `json:"decision"`
}

// ApprovalSpec configures the question the bridge asks when a rule says ask.
type ApprovalSpec struct {
	// timeout is how long the bridge waits for an answer; no answer denies.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="approval timeout must be between 1s and 1h"
	Timeout metav1.Duration `json:"timeout,omitzero"`

	// modes are the approvals offered besides deny: AllowOnce (this call) and
	// AllowSession (this tool for the rest of the session).
	// +optional
	// +listType=set
	// +kubebuilder:default={AllowOnce,AllowSession}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	Modes []ApprovalMode `json:"modes,omitempty"`

	// channels are the ways a person may be asked, in the order the bridge
	// tries them: Elicitation (the agent's client asks its user; skipped
	// when the client cannot be asked) and ToolApproval (a person outside
	// the agent decides a ToolApproval object, e.g. with kubectl mcp). A
	// request no listed channel can carry is denied with
	// approval_unavailable. Where several policies ask about one request,
	// only the channels all of them list are tried.
	// +optional
	// +listType=set
	// +kubebuilder:default={Elicitation}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	Channels []ApprovalChannel `json:"channels,omitempty"`
}

// RateLimit caps how often each subject may call.
type RateLimit struct {
	// callsPerMinute each subject may make under this policy.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	CallsPerMinute int32 `json:"callsPerMinute"`

	// burst is how many calls may come at once; defaults to callsPerMinute.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Burst int32 `json:"burst,omitempty"`
}

// ToolPolicyStatus is what the controller made of the policy.
type ToolPolicyStatus struct {
	// conditions: Ready (True when compiled; False with reason Invalid and the
	// compile error otherwise) and Warnings (True with reason HasWarnings
	// when the lints found something, each listed in the message with how to
	// write it safely; False with reason NoWarnings otherwise; Unknown while
	// the policy does not compile).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// matchedServers are the MCPServers in this namespace that have at least one
	// tool a rule matches, sorted.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	MatchedServers []string `json:"matchedServers,omitempty"`

	// toolCount is the number of published tools some rule matches.
	// +optional
	ToolCount int32 `json:"toolCount,omitempty"`
}

// ToolPolicy grants subjects the use of tools, resources and prompts of the MCP
// servers in its namespace, like a Role with its binding.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tp,categories=mcp
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Warnings",type=string,JSONPath=`.status.conditions[?(@.type=="Warnings")].status`
// +kubebuilder:printcolumn:name="Servers",type=string,JSONPath=`.status.matchedServers`,priority=1
// +kubebuilder:printcolumn:name="Tools",type=integer,JSONPath=`.status.toolCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ToolPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the policy.
	// +required
	Spec ToolPolicySpec `json:"spec"`

	// status is what the controller made of it.
	// +optional
	Status ToolPolicyStatus `json:"status,omitzero"`
}

// ToolPolicyList is a list of ToolPolicies.
// +kubebuilder:object:root=true
type ToolPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []ToolPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ToolPolicy{}, &ToolPolicyList{})
}
