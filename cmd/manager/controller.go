package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/approval"
	"github.com/mcp-operator/mcp-operator/internal/controller"
	"github.com/mcp-operator/mcp-operator/internal/tracing"
	"github.com/mcp-operator/mcp-operator/internal/version"
)

// newScheme knows the built-in kinds and ours.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(mcpv1alpha1.AddToScheme(s))
	return s
}

// controllerFlags are the settings of `manager controller`.
type controllerFlags struct {
	metricsAddr     string
	probeAddr       string
	pprofAddr       string
	leaderElect     bool
	leaderNamespace string
	workers         int
	apiQPS          float64
	apiBurst        int
	workload        controller.WorkloadOptions
	bridgeScope     string
	retention       time.Duration
	zap             zap.Options
	// tracer is the process's tracing (OTEL_* environment), nil when off.
	tracer trace.Tracer
}

func parseControllerFlags(args []string, stderr io.Writer) (controllerFlags, error) {
	var f controllerFlags
	fs := flag.NewFlagSet("manager controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address the Prometheus /metrics endpoint listens on; 0 disables it")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "", "address of Go's profiles (/debug/pprof/), for finding where memory or time goes; empty: off. Keep it on loopback (127.0.0.1:6060)")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader so only one replica reconciles; turn on with more than one replica")
	fs.StringVar(&f.leaderNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's own)")
	fs.IntVar(&f.workers, "max-concurrent-reconciles", 4, "reconcile workers per controller")
	fs.Float64Var(&f.apiQPS, "kube-api-qps", controller.DefaultAPIQPS, "requests per second the controller's API client may send (sustained)")
	fs.IntVar(&f.apiBurst, "kube-api-burst", controller.DefaultAPIBurst, "requests the controller's API client may send in a burst")
	fs.StringVar(&f.workload.OperatorImage, "operator-image", envOr("MANAGER_IMAGE", "localhost/mcp-operator/manager:dev"), "image holding the stdio adapter binary at "+controller.AdapterPath+"; stdio server pods copy the adapter from it (default: $MANAGER_IMAGE)")
	fs.StringVar(&f.workload.OperatorNamespace, "operator-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the bridge and controller pods, the only ones server pods accept connections from (default: $POD_NAMESPACE)")
	fs.StringVar(&f.bridgeScope, "bridge-namespaces", "", "comma-separated namespaces the bridge serves; same-named MCPServers among them conflict (the older keeps the name)")
	fs.DurationVar(&f.retention, "approval-retention", approval.DefaultRetention, "how long a finished ToolApproval (approved, denied, expired, cancelled) is kept before it is deleted")
	f.zap.BindFlags(fs)
	err := fs.Parse(args)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err == nil && f.retention < time.Minute {
		err = fmt.Errorf("--approval-retention must be at least 1m, not %s", f.retention)
	}
	if err == nil && f.workload.OperatorNamespace == "" {
		err = errors.New("--operator-namespace (or $POD_NAMESPACE) is required: server pods accept connections only from the operator's namespace")
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, "manager controller:", err)
	}
	return f, err
}

// newControllerManager builds the manager with every reconciler, metrics,
// health and readiness endpoints and, when asked, leader election.
func newControllerManager(cfg *rest.Config, f controllerFlags) (ctrl.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: newScheme(),
		// Nothing reads managedFields: dropped from every cached object, they
		// are often half its memory (pods, ToolApprovals written by three
		// parties).
		Cache:                   cache.Options{ByObject: controller.CacheByObject(), DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:                 metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:  f.probeAddr,
		PprofBindAddress:        f.pprofAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "controller.mcp-operator.dev",
		LeaderElectionNamespace: f.leaderNamespace,
		// Release the lease on a clean shutdown so the next leader takes over at once.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("while creating the manager: %w", err)
	}
	// Internet egress leaves out the API server's addresses (they may be
	// public): read them once, before the reconcilers start.
	if f.workload.APIServerAddresses, err = controller.APIServerAddresses(context.Background(), mgr.GetAPIReader()); err != nil {
		return nil, err
	}
	opts := controller.Options{MaxConcurrentReconciles: f.workers, Workload: f.workload, ApprovalRetention: f.retention, Tracer: f.tracer}
	for _, ns := range strings.Split(f.bridgeScope, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			opts.BridgeNamespaces = append(opts.BridgeNamespaces, ns)
		}
	}
	// The controllers this process runs.
	if err := controller.NewMCPServerReconciler(mgr, opts).SetupWithManager(mgr, opts); err != nil {
		return nil, fmt.Errorf("while setting up the MCPServer controller: %w", err)
	}
	if err := (&controller.ToolPolicyReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, opts); err != nil {
		return nil, fmt.Errorf("while setting up the ToolPolicy controller: %w", err)
	}
	// ToolApprovals are created and decided outside the controller (the bridge
	// asks, people decide); the controller only removes finished ones, with
	// leader election (one deleter).
	reaper := &approval.Reaper{Client: mgr.GetClient(), Retention: opts.ApprovalRetention, Recorder: mgr.GetEventRecorder("mcp-operator")}
	if err := reaper.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("while setting up the ToolApproval reaper: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("while adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("while adding the readiness check: %w", err)
	}
	return mgr, nil
}

func runController(args []string, _, stderr io.Writer) int {
	f, err := parseControllerFlags(args, stderr)
	if err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap), zap.WriteTo(stderr)))
	ctrl.Log.WithName("setup").Info("starting controller", "version", version.String())
	if f.pprofAddr != "" {
		warnOffLoopback(f.pprofAddr, ctrl.Log.WithName("setup"))
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(stderr, "manager controller: while loading the Kubernetes client configuration: %v\n", err)
		return 1
	}
	cfg.QPS, cfg.Burst = float32(f.apiQPS), f.apiBurst
	ctx := ctrl.SetupSignalHandler()
	tp, err := tracing.Setup(ctx, "mcp-operator-controller", version.String())
	if err != nil {
		fmt.Fprintf(stderr, "manager controller: %v\n", err)
		return 1
	}
	f.tracer = tp.Tracer("github.com/mcp-operator/mcp-operator/internal/controller")
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}()
	mgr, err := newControllerManager(cfg, f)
	if err != nil {
		fmt.Fprintf(stderr, "manager controller: %v\n", err)
		return 1
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintf(stderr, "manager controller: %v\n", err)
		return 1
	}
	return 0
}

// envOr is the value of the environment variable name, or def when unset.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
