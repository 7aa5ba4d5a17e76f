package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// The MCPServer controller's metrics, on controller-runtime's registry
// (the controller's /metrics): whether each server is Ready, and its
// crashes. Only the leader reconciles, so only the leader reports a server.
var (
	serverReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mcp_operator_server_ready",
		Help: "1 when the MCPServer is Ready (served by the bridge), 0 when not, by namespace and server.",
	}, []string{"namespace", "server"})
	serverCrashes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_operator_server_crashes_total",
		Help: "Crashes of MCPServers' pods (exits, OOM kills, probes failed in a row) the controller counted, by namespace and server.",
	}, []string{"namespace", "server"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the controller's own metrics (the dashboard test reads
// their names and labels).
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{serverReady, serverCrashes}
}

// recordMetrics reports s after a reconcile whose status write succeeded
// and whose events were emitted.
func recordMetrics(s *mcpv1alpha1.MCPServer, events []serverEvent) {
	ready := 0.0
	if meta.IsStatusConditionTrue(s.Status.Conditions, mcpv1alpha1.ConditionReady) {
		ready = 1
	}
	serverReady.WithLabelValues(s.Namespace, s.Name).Set(ready)
	for _, e := range events {
		if e.reason == eventCrashed {
			serverCrashes.WithLabelValues(s.Namespace, s.Name).Inc()
		}
	}
}

// forgetMetrics drops the series of a server that is gone.
func forgetMetrics(namespace, name string) {
	serverReady.DeleteLabelValues(namespace, name)
	serverCrashes.DeleteLabelValues(namespace, name)
}
