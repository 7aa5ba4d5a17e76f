package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcp-operator/mcp-operator/internal/controller"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// stats is what the controller child reports of itself: counters since it
// started and, when asked, its heap after a GC.
type stats struct {
	Reconciles      float64            `json:"reconciles"`
	ReconcileErrors float64            `json:"reconcileErrors"`
	Probes          int64              `json:"probes"`
	ProbeFailures   int64              `json:"probeFailures"`
	Requests        map[string]float64 `json:"requests"` // API requests by HTTP method
	Heap            uint64             `json:"heap"`
}

// countingProber is the real MCP prober, counted: a periodic probe is the
// controller's steady-state work.
type countingProber struct {
	inner            controller.Prober
	probes, failures atomic.Int64
}

func (p *countingProber) Probe(ctx context.Context, t controller.ProbeTarget) (*controller.Catalog, error) {
	p.probes.Add(1)
	cat, err := p.inner.Probe(ctx, t)
	if err != nil {
		p.failures.Add(1)
	}
	return cat, err
}

// serveController runs the controller as `manager controller` builds it
// (ctrl.GetConfig from $KUBECONFIG, the same reconcilers and worker count,
// a cache of all namespaces), and answers /stats on listen.
func serveController(listen string, workers int) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = controller.DefaultAPIQPS, controller.DefaultAPIBurst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Cache:                  cache.Options{ByObject: controller.CacheByObject()},
		Metrics:                metricsserver.Options{BindAddress: "0"}, // read from the registry below
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	prober := &countingProber{inner: controller.NewMCPProber()}
	opts := controller.Options{MaxConcurrentReconciles: workers, Prober: prober}
	if err := controller.NewMCPServerReconciler(mgr, opts).SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := (&controller.ToolPolicyReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, opts); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		s, err := gather()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		s.Probes, s.ProbeFailures = prober.probes.Load(), prober.failures.Load()
		if r.URL.Query().Has("heap") {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			s.Heap = m.HeapAlloc
		}
		_ = json.NewEncoder(w).Encode(s)
	})
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(l, mux) }()
	return mgr.Start(ctrl.SetupSignalHandler())
}

// gather reads controller-runtime's own metrics: reconciles of the MCPServer
// controller and the API requests of the whole process.
func gather() (stats, error) {
	s := stats{Requests: map[string]float64{}}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return s, err
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			label := map[string]string{}
			for _, l := range m.GetLabel() {
				label[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "controller_runtime_reconcile_total":
				if label["controller"] == "mcpserver" {
					s.Reconciles += m.GetCounter().GetValue()
				}
			case "controller_runtime_reconcile_errors_total":
				if label["controller"] == "mcpserver" {
					s.ReconcileErrors += m.GetCounter().GetValue()
				}
			case "rest_client_requests_total":
				s.Requests[label["method"]] += m.GetCounter().GetValue()
			}
		}
	}
	return s, nil
}
