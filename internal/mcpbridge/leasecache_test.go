package mcpbridge

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/once"
)

// The bridge's Lease cache holds the servers' activity Leases where it
// serves, and the records of ended sessions in its own namespace; where the
// two are one namespace, one selector must take both kinds.
func TestLeaseCacheSelectsBothKindsOfLease(t *testing.T) {
	activityLease := labels.Set{"app.kubernetes.io/managed-by": "mcp-operator", "mcp-operator.dev/server": "fs"}
	sessionEnd := labels.Set{"app.kubernetes.io/managed-by": "mcp-operator", once.LabelKind: once.KindSessionEnd}
	otherLease := labels.Set{"app.kubernetes.io/managed-by": "kube-controller-manager"}

	for _, tc := range []struct {
		name              string
		served            []string
		onceNS            string
		activityIn, endIn []string // namespaces whose selector takes the kind
	}{
		{"records apart", []string{"default"}, "mcp-operator-system", []string{"default"}, []string{"mcp-operator-system"}},
		{"records where it serves", []string{"default", "mcp-operator-system"}, "mcp-operator-system", []string{"default", "mcp-operator-system"}, []string{"mcp-operator-system"}},
		{"no records", []string{"default"}, "", []string{"default"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			served := map[string]cache.Config{}
			for _, n := range tc.served {
				served[n] = cache.Config{}
			}
			got, err := leaseCache(served, tc.onceNS)
			if err != nil {
				t.Fatal(err)
			}
			for n, c := range got.Namespaces {
				wantActivity := slices.Contains(tc.activityIn, n)
				wantEnd := slices.Contains(tc.endIn, n)
				if c.LabelSelector.Matches(activityLease) != wantActivity {
					t.Errorf("%s: activity Lease selected %v, want %v", n, !wantActivity, wantActivity)
				}
				if c.LabelSelector.Matches(sessionEnd) != wantEnd {
					t.Errorf("%s: session-end record selected %v, want %v", n, !wantEnd, wantEnd)
				}
				if c.LabelSelector.Matches(otherLease) {
					t.Errorf("%s: another component's Lease is cached", n)
				}
			}
			if len(got.Namespaces) != len(slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(tc.activityIn), tc.endIn...))))) {
				t.Errorf("cached namespaces %v, want those of %v and %v", got.Namespaces, tc.activityIn, tc.endIn)
			}
		})
	}
}
