package console

import (
	"context"
	"fmt"
	"slices"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// personClients talk to the API server as one person: the console's own
// credentials with that person's user name and groups impersonated, so the
// API server authorizes, admits and audits the person.
type personClients struct {
	client client.Client
	// Only the two typed groups the console uses: a whole clientset builds
	// a client for every group, per person.
	authz authorizationv1.AuthorizationV1Interface
	core  corev1.CoreV1Interface
}

func (s *Server) clientsOf(x *session) (*personClients, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.kube != nil {
		return x.kube, nil
	}
	cfg := rest.CopyConfig(s.opts.Rest)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: x.person.Username, Groups: x.person.Groups}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("while connecting as %s: %w", x.person.Username, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s.opts.Scheme, Mapper: s.mapper, HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("while connecting as %s: %w", x.person.Username, err)
	}
	authz, err := authorizationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("while connecting as %s: %w", x.person.Username, err)
	}
	core, err := corev1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("while connecting as %s: %w", x.person.Username, err)
	}
	x.kube = &personClients{client: c, authz: authz, core: core}
	return x.kube, nil
}

// accessKey is one question to the API server: may this person <verb>
// <resource> in <namespace>?
type accessKey struct {
	namespace, group, resource, verb string
}

type accessAnswer struct {
	allowed bool
	until   time.Time
}

// accessTTL is how long an answer is reused: RBAC changes reach a page
// within it.
const accessTTL = 30 * time.Second

// may asks the API server, as the person (SelfSubjectAccessReview), and
// keeps the answer for accessTTL. A failed review is a no.
func (s *Server) may(ctx context.Context, x *session, k accessKey) bool {
	now := s.opts.Now()
	x.mu.Lock()
	a, ok := x.access[k]
	x.mu.Unlock()
	if ok && now.Before(a.until) {
		return a.allowed
	}
	pc, err := s.clientsOf(x)
	if err != nil {
		return false
	}
	review, err := pc.authz.SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
		Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: k.namespace, Verb: k.verb, Group: k.group, Resource: k.resource}},
	}, metav1.CreateOptions{})
	allowed := err == nil && review.Status.Allowed
	if err != nil {
		s.opts.Log.Info("console: access review failed", "user", x.person.Username, "resource", k.resource, "namespace", k.namespace, "error", err.Error())
	}
	x.mu.Lock()
	x.access[k] = accessAnswer{allowed: allowed, until: now.Add(accessTTL)}
	x.mu.Unlock()
	return allowed
}

// mayList asks whether the person may list a kind of the project in a
// namespace: what a page shows of a namespace needs it.
func (s *Server) mayList(ctx context.Context, x *session, namespace, resource string) bool {
	return s.may(ctx, x, accessKey{namespace: namespace, group: v1alpha1.GroupVersion.Group, resource: resource, verb: "list"})
}

// visible are the namespaces, of those the console's watches know, where
// the person may list resource, sorted.
func (s *Server) visible(ctx context.Context, x *session, resource string) []string {
	var out []string
	for _, ns := range s.namespaces(ctx) {
		if s.mayList(ctx, x, ns, resource) {
			out = append(out, ns)
		}
	}
	return out
}

// namespaces are those holding any MCPServer, ToolPolicy or ToolApproval.
func (s *Server) namespaces(ctx context.Context) []string {
	seen := map[string]bool{}
	var out []string
	add := func(ns string) {
		if !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	var servers v1alpha1.MCPServerList
	if s.cache.List(ctx, &servers, client.UnsafeDisableDeepCopy) == nil {
		for i := range servers.Items {
			add(servers.Items[i].Namespace)
		}
	}
	var policies v1alpha1.ToolPolicyList
	if s.cache.List(ctx, &policies, client.UnsafeDisableDeepCopy) == nil {
		for i := range policies.Items {
			add(policies.Items[i].Namespace)
		}
	}
	var approvals v1alpha1.ToolApprovalList
	if s.cache.List(ctx, &approvals, client.UnsafeDisableDeepCopy) == nil {
		for i := range approvals.Items {
			add(approvals.Items[i].Namespace)
		}
	}
	slices.Sort(out)
	return out
}
