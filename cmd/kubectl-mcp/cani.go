package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// authenticatedGroup is the group Kubernetes gives every authenticated user.
const authenticatedGroup = "system:authenticated"

func canICmd(fs *flag.FlagSet) func(*env, []string) error {
	as := fs.String("as", "", "the subject's user name as the bridge knows it: system:serviceaccount:<namespace>:<name> for a ServiceAccount, the prefixed name for a person signed in through an OAuth issuer (oidc:alice@example.com)")
	var groups stringList
	fs.Var(&groups, "as-group", "a group of the subject, prefixed as the bridge maps it for a person (oidc:dev) (repeatable)")
	args := fs.String("args", "{}", "the call's arguments, a JSON object (for rules with a when condition)")
	risk := fs.String("risk", "", "the tool's risk, for a tool the MCPServer does not publish (read, write, network, destructive)")
	return func(e *env, positional []string) error {
		if len(positional) != 1 {
			return errors.New("give one tool by its namespaced name, mcp.<server>.<tool>")
		}
		if *as == "" {
			return errors.New("--as is required: the user name of the subject to decide for")
		}
		// The API server adds system:authenticated to every authenticated
		// user's groups, and TokenReview reports it to the bridge: a policy
		// for that group applies to every agent, so can-i counts it too.
		if !slices.Contains(groups, authenticatedGroup) {
			groups = append(groups, authenticatedGroup)
		}
		return canI(e, positional[0], policy.SubjectFromUserInfo(*as, groups), *args, v1alpha1.Risk(*risk))
	}
}

// canI decides one tool call the way the bridge would, from the ToolPolicies
// and the MCPServer's published catalog in the namespace, and prints the
// decision with the rule that made it.
func canI(e *env, tool string, subject policy.Subject, rawArgs string, risk v1alpha1.Risk) error {
	ctx := context.Background()
	parts := strings.SplitN(tool, ".", 3)
	if len(parts) != 3 || parts[0] != "mcp" || parts[1] == "" || parts[2] == "" {
		return fmt.Errorf("%q is not a namespaced tool name: want mcp.<server>.<tool>", tool)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(rawArgs), &args); err != nil || args == nil {
		return fmt.Errorf("--args must be a JSON object: %s", rawArgs)
	}
	call := policy.ToolCall{Name: tool, Server: parts[1], Namespace: e.namespace, Risk: risk, Args: args}
	if risk == "" {
		published, err := publishedTool(ctx, e, parts[1], tool)
		if err != nil {
			return err
		}
		call.Risk, call.Annotations = published.Risk, published.Annotations
	}
	var list v1alpha1.ToolPolicyList
	if err := e.client.List(ctx, &list, client.InNamespace(e.namespace)); err != nil {
		return fmt.Errorf("while listing ToolPolicies: %w", err)
	}
	engine, errs := policy.Compile(list.Items)
	for _, ce := range errs {
		fmt.Fprintf(e.out, "warning: ToolPolicy %s is not in force: %s\n", ce.Policy, ce.Error())
	}
	res := engine.DecideTool(subject, call)
	answer := map[v1alpha1.Decision]string{v1alpha1.DecisionAllow: "yes", v1alpha1.DecisionAsk: "ask", v1alpha1.DecisionDeny: "no"}[res.Decision]
	fmt.Fprintln(e.out, answer)
	fmt.Fprintf(e.out, "  subject:  %s\n  tool:     %s (risk %s)\n  decision: %s\n  rule:     %s\n", subject.Username(), tool, res.RiskAtDecision, res.Decision, rulesOf(res))
	if res.Reason != "" {
		fmt.Fprintf(e.out, "  reason:   %s\n", res.Reason)
	}
	if res.Decision == v1alpha1.DecisionAsk && res.Approval != nil {
		fmt.Fprintf(e.out, "  asked:    through %s (in this order), approvals %s, waiting up to %s\n",
			join(res.Approval.Channels, "no channel: it would be denied with approval_unavailable"), join(res.Approval.Modes, "none"), res.Approval.Timeout)
	}
	printWarnings(ctx, e, list.Items, engine.ToolRules(subject, call))
	if res.Decision != v1alpha1.DecisionAllow {
		return errDenied
	}
	return nil
}

// printWarnings prints the lint warnings of the rules that may decide the
// call (those matching it by name and risk, whatever their conditions say),
// as the ToolPolicy controller computes them from the namespace's
// MCPServers: a condition that reads a path unsafely answers yes here too.
func printWarnings(ctx context.Context, e *env, policies []v1alpha1.ToolPolicy, rules []policy.RuleRef) {
	if len(rules) == 0 {
		return
	}
	// Without the servers only what the policies alone show is linted: no
	// permission to list them is common and says nothing new; any other
	// failure is worth a note, as the warnings are then fewer.
	var catalogs []policy.Catalog
	var servers v1alpha1.MCPServerList
	switch err := e.client.List(ctx, &servers, client.InNamespace(e.namespace)); {
	case err == nil:
		catalogs = policy.CatalogsOf(e.namespace, servers.Items)
	case !apierrors.IsForbidden(err):
		fmt.Fprintf(e.out, "  note:     the MCPServers of %s could not be listed (%v): only what the policies alone show is linted\n", e.namespace, err)
	}
	for i := range policies {
		tp := &policies[i]
		compiled, errs := policy.CompilePolicy(tp)
		if len(errs) > 0 {
			continue
		}
		for _, w := range compiled.Lint(&tp.Spec, catalogs) {
			if slices.ContainsFunc(rules, func(r policy.RuleRef) bool {
				return r.Namespace == tp.Namespace && r.Name == tp.Name && r.Section == "rules" && r.Index == w.Rule
			}) {
				fmt.Fprintf(e.out, "  warning:  ToolPolicy %s/%s %s\n", tp.Namespace, tp.Name, w)
			}
		}
	}
}

func publishedTool(ctx context.Context, e *env, server, tool string) (*v1alpha1.ToolStatus, error) {
	var s v1alpha1.MCPServer
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.namespace, Name: server}, &s); err != nil {
		return nil, fmt.Errorf("while reading MCPServer %s/%s for the tool's risk: %w (give --risk to decide without it)", e.namespace, server, err)
	}
	for i := range s.Status.Tools {
		if s.Status.Tools[i].Name == tool {
			return &s.Status.Tools[i], nil
		}
	}
	return nil, fmt.Errorf("MCPServer %s/%s does not publish %s (give --risk to decide anyway)", e.namespace, server, tool)
}

func rulesOf(res policy.Result) string {
	if len(res.Rules) == 0 {
		return res.SourcedFrom
	}
	refs := make([]string, len(res.Rules))
	for i, r := range res.Rules {
		refs[i] = r.String()
	}
	return strings.Join(refs, ", ")
}

func join[T ~string](items []T, none string) string {
	if len(items) == 0 {
		return none
	}
	s := make([]string, len(items))
	for i, x := range items {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}
