package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

type policiesView struct {
	Namespaces []string
	Policies   []*v1alpha1.ToolPolicy
	CanI       canIForm
}

// canIForm is the question "may this subject call this tool" and, once
// asked, the answer from the bridge's own permission engine (the same one
// `kubectl mcp can-i` asks).
type canIForm struct {
	Namespace, Tool, As, Groups, Args, Risk string
	Asked                                   bool
	Error                                   string
	Answer                                  string // yes, ask or no
	Result                                  policy.Result
	Rules                                   []string
	NotInForce                              []string
}

// authenticatedGroup is the group the API server gives every
// authenticated user; the bridge learns it too, so can-i counts it.
const authenticatedGroup = "system:authenticated"

func (s *Server) policiesPage(r *http.Request, x *session) (string, page, error) {
	ctx := r.Context()
	v := policiesView{Namespaces: s.visible(ctx, x, "toolpolicies")}
	var list v1alpha1.ToolPolicyList
	if err := s.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return "", page{}, err
	}
	for i := range list.Items {
		if _, ok := slices.BinarySearch(v.Namespaces, list.Items[i].Namespace); ok {
			v.Policies = append(v.Policies, &list.Items[i])
		}
	}
	slices.SortFunc(v.Policies, func(a, b *v1alpha1.ToolPolicy) int {
		return compareStrings(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	q := r.URL.Query()
	f := canIForm{Namespace: q.Get("namespace"), Tool: strings.TrimSpace(q.Get("tool")), As: strings.TrimSpace(q.Get("as")),
		Groups: q.Get("groups"), Args: q.Get("args"), Risk: q.Get("risk")}
	if f.Args == "" {
		f.Args = "{}"
	}
	if q.Has("tool") {
		f.Asked = true
		if _, ok := slices.BinarySearch(v.Namespaces, f.Namespace); !ok {
			f.Error = fmt.Sprintf("You may not list the ToolPolicies of namespace %q, so the console cannot decide with them.", f.Namespace)
		} else {
			s.canI(r, &f, policiesIn(v.Policies, f.Namespace))
		}
	}
	v.CanI = f
	return "policies", page{Title: "Policies", Nav: "policies", Live: topicPolicies, Data: v}, nil
}

func policiesIn(all []*v1alpha1.ToolPolicy, ns string) []v1alpha1.ToolPolicy {
	var out []v1alpha1.ToolPolicy
	for _, p := range all {
		if p.Namespace == ns {
			out = append(out, *p)
		}
	}
	return out
}

// canI decides one tool call as the bridge would, from the namespace's
// ToolPolicies and the tool's published risk.
func (s *Server) canI(r *http.Request, f *canIForm, policies []v1alpha1.ToolPolicy) {
	parts := strings.SplitN(f.Tool, ".", 3)
	if len(parts) != 3 || parts[0] != "mcp" || parts[1] == "" || parts[2] == "" {
		f.Error = fmt.Sprintf("%q is not a namespaced tool name: want mcp.<server>.<tool>.", f.Tool)
		return
	}
	if f.As == "" {
		f.Error = "Give the subject's user name (as the bridge sees it: system:serviceaccount:<namespace>:<name>, or a person's prefixed name)."
		return
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(f.Args), &args); err != nil || args == nil {
		f.Error = "The arguments must be a JSON object."
		return
	}
	call := policy.ToolCall{Name: f.Tool, Server: parts[1], Namespace: f.Namespace, Risk: v1alpha1.Risk(f.Risk), Args: args}
	if f.Risk == "" {
		tool, err := s.publishedTool(r, f.Namespace, parts[1], f.Tool)
		if err != "" {
			f.Error = err
			return
		}
		call.Risk, call.Annotations = tool.Risk, tool.Annotations
	}
	groups := splitTrim(f.Groups)
	if !slices.Contains(groups, authenticatedGroup) {
		groups = append(groups, authenticatedGroup)
	}
	engine, errs := policy.Compile(policies)
	for _, ce := range errs {
		f.NotInForce = append(f.NotInForce, fmt.Sprintf("ToolPolicy %s is not in force: %s", ce.Policy, ce.Error()))
	}
	f.Result = engine.DecideTool(policy.SubjectFromUserInfo(f.As, groups), call)
	f.Answer = map[v1alpha1.Decision]string{v1alpha1.DecisionAllow: "yes", v1alpha1.DecisionAsk: "ask", v1alpha1.DecisionDeny: "no"}[f.Result.Decision]
	for _, rule := range f.Result.Rules {
		f.Rules = append(f.Rules, rule.String())
	}
	if len(f.Rules) == 0 {
		f.Rules = []string{f.Result.SourcedFrom}
	}
}

// publishedTool finds the tool in its MCPServer's catalog, which the
// person may list (the can-i form is answered only where they may see the
// servers too).
func (s *Server) publishedTool(r *http.Request, ns, server, tool string) (*v1alpha1.ToolStatus, string) {
	var srv v1alpha1.MCPServer
	if err := s.cache.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: server}, &srv); err != nil || !s.mayList(r.Context(), s.sessionOf(r), ns, "mcpservers") {
		return nil, fmt.Sprintf("No MCPServer %s/%s that you may see to read the tool's risk from: choose the risk to decide without it.", ns, server)
	}
	for i := range srv.Status.Tools {
		if srv.Status.Tools[i].Name == tool {
			return &srv.Status.Tools[i], ""
		}
	}
	return nil, fmt.Sprintf("MCPServer %s/%s does not publish %s: choose the risk to decide anyway.", ns, server, tool)
}

func splitTrim(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
