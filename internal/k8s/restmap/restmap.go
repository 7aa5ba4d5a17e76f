// Package restmap maps a known, short list of namespaced kinds to their
// resources without discovery. A discovering mapper reads the resources of
// every group the API server has and keeps them (about 0.4 MB of heap) for
// a process that uses a handful of kinds known when it was built. A kind
// not listed fails with "no matches for kind", not silently.
package restmap

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Namespaced maps each kind, and its list kind, to its lower-case plural
// resource (mcpservers, toolapprovals, secrets: the CRDs' and the core
// group's names), all namespaced.
func Namespaced(kinds ...schema.GroupVersionKind) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range kinds {
		// The list kind first, so that a resource maps back to the kind
		// itself.
		plural, singular := meta.UnsafeGuessKindToResource(gvk)
		m.AddSpecific(gvk.GroupVersion().WithKind(gvk.Kind+"List"), plural, singular, meta.RESTScopeNamespace)
		m.AddSpecific(gvk, plural, singular, meta.RESTScopeNamespace)
	}
	return m
}
