package controller

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func tools(n int) []mcpv1alpha1.ToolStatus {
	out := make([]mcpv1alpha1.ToolStatus, n)
	for i := range out {
		name := fmt.Sprintf("t%05d", i)
		out[i] = mcpv1alpha1.ToolStatus{Name: "mcp.s." + name, UpstreamName: name, Risk: mcpv1alpha1.RiskNetwork, SchemaDigest: "sha256:" + name}
	}
	return out
}

func cond(s *mcpv1alpha1.MCPServer, typ string) string {
	c := meta.FindStatusCondition(s.Status.Conditions, typ)
	if c == nil {
		return "-"
	}
	return string(c.Status) + "/" + c.Reason
}

func TestPublishCatalog(t *testing.T) {
	approved := "sha256:" + strings.Repeat("a", 64)
	other := "sha256:" + strings.Repeat("b", 64)
	cases := []struct {
		name           string
		pinning        mcpv1alpha1.CatalogPinning
		servedDigest   string
		cat            Catalog
		wantDigest     string
		wantListed     int
		ready, degrade string
		refused        bool
	}{
		{name: "auto publishes", cat: Catalog{Tools: tools(3), Digest: other}, wantDigest: other, wantListed: 3, ready: "True/Serving", degrade: "-"},
		{name: "invalid tools degrade", cat: Catalog{Tools: tools(1), Invalid: []string{"bad name: not allowed"}, Digest: other},
			wantDigest: other, wantListed: 1, ready: "True/Serving", degrade: "True/InvalidTools"},
		{name: "more than 1000 tools are cut in status", cat: Catalog{Tools: tools(1200), Digest: other},
			wantDigest: other, wantListed: 1000, ready: "True/Serving", degrade: "True/CatalogTruncated"},
		{name: "locked and approved", pinning: mcpv1alpha1.CatalogPinningLocked, cat: Catalog{Tools: tools(2), Digest: approved},
			wantDigest: approved, wantListed: 2, ready: "True/Serving", degrade: "-"},
		{name: "locked, never approved: nothing served", pinning: mcpv1alpha1.CatalogPinningLocked, cat: Catalog{Tools: tools(2), Digest: other},
			wantDigest: "", wantListed: 0, ready: "False/CatalogNotApproved", degrade: "-", refused: true},
		{name: "locked, approved one kept", pinning: mcpv1alpha1.CatalogPinningLocked, servedDigest: approved, cat: Catalog{Tools: tools(5), Digest: other},
			wantDigest: approved, wantListed: 1, ready: "True/Serving", degrade: "True/CatalogNotApproved", refused: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 4}}
			s.Spec.Tools.CatalogPinning = tc.pinning
			s.Spec.Tools.ApprovedDigest = approved
			if tc.servedDigest != "" {
				publishCatalog(s, &Catalog{Tools: tools(1), Digest: tc.servedDigest}, &mcpv1alpha1.Endpoint{URL: "http://x"})
			}
			res := publishCatalog(s, &tc.cat, &mcpv1alpha1.Endpoint{URL: "http://x"})
			if s.Status.CatalogDigest != tc.wantDigest || len(s.Status.Tools) != tc.wantListed {
				t.Errorf("digest %q with %d tools listed, want %q with %d", s.Status.CatalogDigest, len(s.Status.Tools), tc.wantDigest, tc.wantListed)
			}
			if got := cond(s, mcpv1alpha1.ConditionReady); got != tc.ready {
				t.Errorf("Ready %s, want %s", got, tc.ready)
			}
			if got := cond(s, mcpv1alpha1.ConditionDegraded); got != tc.degrade {
				t.Errorf("Degraded %s, want %s", got, tc.degrade)
			}
			if res.refused != tc.refused {
				t.Errorf("refused %v, want %v", res.refused, tc.refused)
			}
			if tc.wantListed > 0 && int(s.Status.ToolCount) != len(tc.cat.Tools) && !tc.refused {
				t.Errorf("toolCount %d, want %d", s.Status.ToolCount, len(tc.cat.Tools))
			}
			for _, c := range s.Status.Conditions {
				if c.ObservedGeneration != 4 {
					t.Errorf("%s observedGeneration %d, want 4", c.Type, c.ObservedGeneration)
				}
			}
		})
	}
}

func TestDiffCatalogsNamesAddedRemovedChanged(t *testing.T) {
	old := []mcpv1alpha1.ToolStatus{{UpstreamName: "a", SchemaDigest: "1"}, {UpstreamName: "b", SchemaDigest: "1"}, {UpstreamName: "c", SchemaDigest: "1"}}
	updated := []mcpv1alpha1.ToolStatus{{UpstreamName: "b", SchemaDigest: "2"}, {UpstreamName: "c", SchemaDigest: "1"}, {UpstreamName: "d", SchemaDigest: "1"}}
	if got, want := diffCatalogs(old, updated).String(), "added: d; removed: a; changed: b"; got != want {
		t.Errorf("diff %q, want %q", got, want)
	}
	if !diffCatalogs(old, old).empty() {
		t.Error("a catalog differs from itself")
	}
}
