package restmap

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNamespacedMapsKindsAndListsAndNothingElse(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "mcp-operator.dev", Version: "v1alpha1", Kind: "ToolApproval"}
	m := Namespaced(gvk)
	for _, kind := range []string{"ToolApproval", "ToolApprovalList"} {
		mapping, err := m.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: kind}, gvk.Version)
		if err != nil || mapping.Resource.Resource != "toolapprovals" || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Errorf("%s: %+v, %v", kind, mapping, err)
		}
	}
	if k, err := m.KindFor(gvk.GroupVersion().WithResource("toolapprovals")); err != nil || k != gvk {
		t.Errorf("toolapprovals maps back to %v, %v", k, err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: "MCPServer"}, gvk.Version); !meta.IsNoMatchError(err) {
		t.Errorf("a kind not listed: %v, want no match", err)
	}
}
