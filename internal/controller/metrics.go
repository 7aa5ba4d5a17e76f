package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// The MCPServer controller's metrics, on controller-runtime's registry
// (the controller's /metrics): whether each server is Ready, its crashes,
// its last successful probe, and its sleeps and wakes. Only the leader reconciles, so only the leader reports a server.
var (
	serverReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mcp_operator_server_ready",
		Help: "1 when the MCPServer is Ready (served by the bridge), 0 when not, by namespace and server.",
	}, []string{"namespace", "server"})
	serverCrashes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_operator_server_crashes_total",
		Help: "Crashes of MCPServers' pods (exits, OOM kills, probes failed in a row) the controller counted, by namespace and server.",
	}, []string{"namespace", "server"})
	// The last successful probe is a metric, not a status write per probe:
	// status.lastProbeTime is refreshed only rarely.
	serverLastProbe = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mcp_operator_server_last_probe_success_timestamp_seconds",
		Help: "When the MCPServer last answered its probe (Unix seconds), by namespace and server.",
	}, []string{"namespace", "server"})
	serverSleeping = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mcp_operator_server_sleeping",
		Help: "1 while the MCPServer sleeps (no pod, catalog still listed; the next call wakes it), 0 when not, by namespace and server.",
	}, []string{"namespace", "server"})
	serverWakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_operator_server_wakes_total",
		Help: "Wakes of sleeping MCPServers (a call or kubectl mcp wake), by namespace and server.",
	}, []string{"namespace", "server"})
	serverWakeSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcp_operator_server_wake_seconds",
		Help:    "Time from a wake request (the activity Lease's renewTime) to the server Ready again, by namespace.",
		Buckets: []float64{0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 20, 30, 60, 120},
	}, []string{"namespace"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the controller's own metrics (the dashboard test reads
// their names and labels).
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{serverReady, serverCrashes, serverLastProbe, serverSleeping, serverWakes, serverWakeSeconds}
}

// recordMetrics reports s after a reconcile whose status write succeeded
// and whose events were emitted.
func recordMetrics(s *mcpv1alpha1.MCPServer, sc *scope) {
	serverReady.WithLabelValues(s.Namespace, s.Name).Set(oneIf(meta.IsStatusConditionTrue(s.Status.Conditions, mcpv1alpha1.ConditionReady)))
	serverSleeping.WithLabelValues(s.Namespace, s.Name).Set(oneIf(s.Status.SleepingSince != nil))
	if sc.probed {
		serverLastProbe.WithLabelValues(s.Namespace, s.Name).Set(float64(sc.now.UnixNano()) / 1e9)
	}
	if sc.wakeStarted {
		serverWakes.WithLabelValues(s.Namespace, s.Name).Inc()
	}
	for _, e := range sc.events {
		switch {
		case e.reason == eventCrashed:
			serverCrashes.WithLabelValues(s.Namespace, s.Name).Inc()
		case e.reason == eventWoke && !sc.wakeRequest.IsZero():
			serverWakeSeconds.WithLabelValues(s.Namespace).Observe(sc.now.Sub(sc.wakeRequest).Seconds())
		}
	}
}

func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// forgetMetrics drops the series of a server that is gone.
func forgetMetrics(namespace, name string) {
	serverReady.DeleteLabelValues(namespace, name)
	serverCrashes.DeleteLabelValues(namespace, name)
	serverLastProbe.DeleteLabelValues(namespace, name)
	serverSleeping.DeleteLabelValues(namespace, name)
	serverWakes.DeleteLabelValues(namespace, name)
}
