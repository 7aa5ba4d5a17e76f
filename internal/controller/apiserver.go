package controller

import (
	"context"
	"fmt"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list

// APIServerAddresses reads the Kubernetes API server's own addresses, sorted:
// the endpoints of Service default/kubernetes, which the API servers publish
// themselves. Read once at start (WorkloadOptions.APIServerAddresses), with
// an uncached reader, so the controller watches no EndpointSlices.
func APIServerAddresses(ctx context.Context, r client.Reader) ([]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := r.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, fmt.Errorf("while reading the API server's addresses (EndpointSlices of Service default/kubernetes): %w", err)
	}
	var out []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			out = append(out, e.Addresses...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
