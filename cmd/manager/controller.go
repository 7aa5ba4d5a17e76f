package main

import (
	"flag"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/controller"
	"github.com/mcp-operator/mcp-operator/internal/version"
)

// newScheme knows the built-in kinds and ours.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(mcpv1alpha1.AddToScheme(s))
	return s
}

func runController(args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("manager controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	metricsAddr := fs.String("metrics-bind-address", ":8080", "address the Prometheus /metrics endpoint listens on; 0 disables it")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	leaderElect := fs.Bool("leader-elect", false, "elect a leader so only one replica reconciles; turn on with more than one replica")
	leaderNamespace := fs.String("leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's own)")
	workers := fs.Int("max-concurrent-reconciles", 4, "reconcile workers per controller")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.WriteTo(stderr)))
	log := ctrl.Log.WithName("setup")
	log.Info("starting controller", "version", version.String())

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(stderr, "manager controller: while loading the Kubernetes client configuration: %v\n", err)
		return 1
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  newScheme(),
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "controller.mcp-operator.dev",
		LeaderElectionNamespace: *leaderNamespace,
		// The process exits soon after losing the lease; release it on a clean
		// shutdown so the next leader takes over at once.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		fmt.Fprintf(stderr, "manager controller: while creating the manager: %v\n", err)
		return 1
	}
	if err := controller.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: *workers}); err != nil {
		fmt.Fprintf(stderr, "manager controller: %v\n", err)
		return 1
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		fmt.Fprintf(stderr, "manager controller: while adding the health check: %v\n", err)
		return 1
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		fmt.Fprintf(stderr, "manager controller: while adding the readiness check: %v\n", err)
		return 1
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintf(stderr, "manager controller: %v\n", err)
		return 1
	}
	return 0
}
