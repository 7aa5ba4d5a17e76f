package controller

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// The controllers on a real kube-apiserver and etcd. No kubelet runs here:
// tests write pod status as a kubelet would. Each Describe starts a manager
// with the reconcilers it tests, so it can inject its own clock.
var (
	cfg       *rest.Config
	k8sClient client.Client
	testEnv   *envtest.Environment
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "controllers on a real API server")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	testEnv, err = testenv.New()
	Expect(err).NotTo(HaveOccurred())
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// ctx is the context of the tests' API calls.
var ctx = context.Background()

// startManager runs a manager with the given reconcilers, watching only the
// spec's namespaces, until the spec ends.
func startManager(namespaces []string, setup ...func(ctrl.Manager) error) {
	stop := startStoppableManager(namespaces, setup...)
	DeferCleanup(stop)
}

// startStoppableManager runs a manager with the given reconcilers until the
// returned function stops it, as a controller restart would.
func startStoppableManager(namespaces []string, setup ...func(ctrl.Manager) error) (stop func()) {
	watched := map[string]cache.Config{}
	for _, ns := range namespaces {
		watched[ns] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		// Objects of earlier specs stay in the API server (envtest runs no
		// namespace controller); a manager sees only its spec's namespaces.
		Cache:                  cache.Options{DefaultNamespaces: watched},
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Specs start the same controllers in managers of their own.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	for _, s := range setup {
		Expect(s(mgr)).To(Succeed())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			Eventually(done).WithTimeout(30 * time.Second).Should(BeClosed())
		})
	}
}

// secretListsAndWatches counts the lists and watches of Secrets the API
// server has served or is serving (a watch counts once it ends, so the
// open ones are read from the long-running gauge), from its own metrics.
func secretListsAndWatches() int {
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	total := 0
	for _, line := range strings.Split(string(raw), "\n") {
		counted := strings.HasPrefix(line, "apiserver_request_total{") || strings.HasPrefix(line, "apiserver_longrunning_requests{")
		if !counted || !strings.Contains(line, `resource="secrets"`) || !(strings.Contains(line, `verb="LIST"`) || strings.Contains(line, `verb="WATCH"`)) {
			continue
		}
		n, err := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
		Expect(err).NotTo(HaveOccurred())
		total += n
	}
	return total
}

// specEnv is what withController gives each spec: its namespace and the
// fake clock of the MCPServer reconciler watching it.
type specEnv struct {
	ns  string
	clk *clocktesting.FakeClock
}

// withController starts, before each spec of the container, a namespace
// and an MCPServer reconciler with a fake clock watching it.
func withController() *specEnv {
	env := &specEnv{}
	BeforeEach(func() {
		env.ns = createNamespace()
		env.clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
		startManager([]string{env.ns}, reconcilerFor(env.clk))
	})
	return env
}
