package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// ToolCall is one tools/call as the engine sees it.
type ToolCall struct {
	// Name is the namespaced name mcp.<server>.<tool>.
	Name string
	// Server is the MCPServer's name, Namespace its namespace.
	Server, Namespace string
	// Risk is the tool's published risk; empty is network (the default of
	// every MCP tool) and an unknown value counts as destructive.
	Risk v1alpha1.Risk
	// Annotations are the tool's published hints, if any.
	Annotations *v1alpha1.ToolAnnotations
	// Args are the call's arguments as decoded from JSON (map[string]any,
	// []any, string, float64, bool, nil).
	Args map[string]any
	// RawArgs are the arguments' JSON text (an object), decoded into Args
	// only when a condition reads args: most calls meet no condition, and
	// the bridge then decodes nothing. Args wins when both are set.
	RawArgs json.RawMessage
}

// ResourceRead is one resources/read.
type ResourceRead struct {
	// Server is the MCPServer's name, Namespace its namespace.
	Server, Namespace string
	// URI is the resource's upstream URI.
	URI string
}

// PromptGet is one prompts/get.
type PromptGet struct {
	// Name is the namespaced name mcp.<server>.<prompt>.
	Name string
	// Server is the MCPServer's name, Namespace its namespace.
	Server, Namespace string
}

// SkillGet is one skill asked for: listed, its entry got, or a file read.
type SkillGet struct {
	// Name is the namespaced name mcp.<server>.<skill path>.
	Name string
	// Server is the MCPServer's name, Namespace its namespace.
	Server, Namespace string
}

// Sources of a decision besides a policy rule (the sourcedFrom of
// permission.requested and permission.resolved events).
const (
	SourceDefault          = "default"
	SourceSessionAllowOnce = "session_allow_once"
	SourceSessionAllow     = "session_allow"
)

// RuleRef names one rule of one policy.
type RuleRef struct {
	// Namespace and Name of the ToolPolicy.
	Namespace, Name string
	// Section is the list in the spec: rules, resources, prompts, or
	// rateLimit (then Index is 0).
	Section string
	// Index in that list.
	Index int
}

// String is the rule in sourcedFrom form: policy:<namespace>/<name>#rules[2].
func (r RuleRef) String() string {
	if r.Section == sectionRateLimit {
		return fmt.Sprintf("policy:%s/%s#%s", r.Namespace, r.Name, r.Section)
	}
	return fmt.Sprintf("policy:%s/%s#%s[%d]", r.Namespace, r.Name, r.Section, r.Index)
}

const (
	sectionRules     = "rules"
	sectionResources = "resources"
	sectionPrompts   = "prompts"
	sectionSkills    = "skills"
	sectionRateLimit = "rateLimit"
)

// Approval is what the bridge may offer when the decision is ask.
type Approval struct {
	// Modes besides deny: AllowOnce, AllowSession. AllowSession is never
	// offered for a destructive tool: each of its calls is asked.
	Modes []v1alpha1.ApprovalMode
	// Timeout after which an unanswered question denies.
	Timeout time.Duration
	// Channels are the ways a person may be asked, in the order to try
	// them.
	Channels []v1alpha1.ApprovalChannel
}

// Offers reports whether ch is among the channels.
func (a *Approval) Offers(ch v1alpha1.ApprovalChannel) bool {
	return a != nil && slices.Contains(a.Channels, ch)
}

// Allows reports whether m is among the modes.
func (a *Approval) Allows(m v1alpha1.ApprovalMode) bool {
	if a == nil {
		return false
	}
	for _, x := range a.Modes {
		if x == m {
			return true
		}
	}
	return false
}

// Result is a decision and why it was made.
type Result struct {
	// Decision is allow, deny or ask.
	Decision v1alpha1.Decision
	// Rules are the rules that gave the decision, in policy and rule order;
	// empty for the default.
	Rules []RuleRef
	// RiskAtDecision is the risk the request was decided at (read for
	// resources and prompts).
	RiskAtDecision v1alpha1.Risk
	// SourcedFrom is policy:<namespace>/<name>#rules[i] (the first of Rules),
	// default, session_allow_once or session_allow.
	SourcedFrom string
	// Reason says why, for the caller and the audit log.
	Reason string
	// Approval is set when Decision is ask. It may be shared with other
	// results: read it, never change it.
	Approval *Approval
	// BlockInjection says a result the injection scan flags must be
	// withheld: some rule that matched the request (not only a deciding
	// one) says injection: Block. Session grants and rate limits leave it
	// as it is.
	BlockInjection bool
	// RetryAfter is, for a call a rate limit denies, how long until its
	// bucket holds a call again; 0 otherwise.
	RetryAfter time.Duration

	// target is what the result decides, so a grant applies only to the
	// tool, prompt or resource it was given for.
	target target
	// rateLimits are the limits of the policies that had a rule matching
	// the request.
	rateLimits []*rateLimitSpec
}

// target names what a decision is about, with its kind, so a grant for a
// tool never matches a prompt of the same name (both are mcp.<server>.<x>).
type target struct {
	kind string // kindTool, kindPrompt, kindSkill or kindResource
	// name is the tool's or prompt's namespaced name, or for a resource
	// the server and the URI separated by a space (which no server name
	// holds). Like tool names, it leaves the namespace out: server names
	// are unique among the servers one bridge serves.
	name string
}

const (
	kindTool     = "tool"
	kindPrompt   = "prompt"
	kindSkill    = "skill"
	kindResource = "resource"
)

func toolTarget(name string) target { return target{kind: kindTool, name: name} }

func resourceTarget(read ResourceRead) target {
	return target{kind: kindResource, name: read.Server + " " + read.URI}
}
