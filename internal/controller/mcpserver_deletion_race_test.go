package controller

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// A pod deleted while a reconcile probes it: the reconcile read the pod
// before its deletion, and its probe fails because the kubelet stopped the
// server. That failure is the deletion's, not the server's. envtest runs no
// kubelet and the race lasts milliseconds, so the test holds the probe in
// flight (holdingProber) while it deletes the pod and stops the server.

// switchableServer is a server's port that can stop answering, as a pod's
// server does when the kubelet stops it, and answer again, as its
// replacement's does: a loopback proxy to a real go-sdk everything-server.
type switchableServer struct {
	port, target int
	mu           sync.Mutex
	ln           net.Listener
}

func newSwitchableServer() *switchableServer {
	s := &switchableServer{port: testkit.FreePort(GinkgoT()), target: testpeers.GoEverything(GinkgoT(), false).Port}
	DeferCleanup(s.stop)
	return s
}

func (s *switchableServer) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return
	}
	var err error
	// The port was just closed: the kernel may still hold it a moment.
	Eventually(func() error {
		s.ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(s.port))
		return err
	}).Should(Succeed())
	go func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.forward(c)
		}
	}(s.ln)
}

func (s *switchableServer) forward(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.target))
	if err != nil {
		return
	}
	defer u.Close()
	go func() { _, _ = io.Copy(u, c) }()
	_, _ = io.Copy(c, u)
}

// stop closes the port: connections are refused, as by a stopped server.
func (s *switchableServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
		s.ln = nil
	}
}

// holdingProber runs the real prober, but once armed holds the next probe
// until released.
type holdingProber struct {
	Prober
	// probes counts the probes begun.
	probes   atomic.Int32
	armed    atomic.Bool
	held     chan struct{}
	released chan struct{}
}

func newHoldingProber() *holdingProber {
	return &holdingProber{Prober: NewMCPProber(), held: make(chan struct{}, 1), released: make(chan struct{})}
}

func (p *holdingProber) Probe(ctx context.Context, t ProbeTarget) (*Catalog, error) {
	p.probes.Add(1)
	if p.armed.CompareAndSwap(true, false) {
		p.held <- struct{}{}
		<-p.released
	}
	return p.Prober.Probe(ctx, t)
}

// holdNext holds the next probe; then waits until a reconcile is in it.
func (p *holdingProber) holdNext(then func()) {
	p.armed.Store(true)
	then()
	EventuallyWithOffset(1, p.held).WithTimeout(10 * time.Second).Should(Receive())
}

// heldProbeEnv is a namespace and a controller whose probes a test can
// hold, of a server whose port can stop answering.
type heldProbeEnv struct {
	ns     string
	clk    *clocktesting.FakeClock
	prober *holdingProber
	server *switchableServer
}

// withHeldProbes starts, before each spec of the container, a namespace and
// a controller probing through a holdingProber.
func withHeldProbes() *heldProbeEnv {
	env := &heldProbeEnv{}
	BeforeEach(func() {
		env.ns = createNamespace()
		env.clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
		env.prober = newHoldingProber()
		env.server = newSwitchableServer()
		env.server.start()
		startManager([]string{env.ns}, func(mgr ctrl.Manager) error {
			r := testReconciler(mgr, env.clk)
			r.Prober = env.prober
			return r.SetupWithManager(mgr, Options{MaxConcurrentReconciles: 2})
		})
	})
	return env
}

func probeFailures(s *mcpv1alpha1.MCPServer) func() int32 {
	return func() int32 { return get(s).Status.Restarts.ProbeFailures }
}

var _ = Describe("A pod deleted during its probe", func() {
	env := withHeldProbes()
	var (
		ns     string
		clk    *clocktesting.FakeClock
		prober *holdingProber
		server *switchableServer
	)
	BeforeEach(func() { ns, clk, prober, server = env.ns, env.clk, env.prober, env.server })

	It("is not counted a crash when the probe that would have been its third failure was of the deleted pod", func() {
		s := httpServer(ns, "hung", server.port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := readyServing(s, clk)

		// The server hangs: two failed probes of the pod the kubelet reports
		// Ready, one more would be a crash.
		server.stop()
		poke(s)
		Eventually(probeFailures(s)).WithTimeout(10 * time.Second).Should(BeEquivalentTo(2))

		// Someone deletes the pod to unstick it while the next probe is in
		// flight: the reconcile read the pod before the deletion.
		// (The failed probe's requeue brings it.)
		prober.holdNext(func() {})
		holdPod(pod)
		Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		close(prober.released)

		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonRestarting))
		Expect(condition(s, mcpv1alpha1.ConditionReady)().Message).To(ContainSubstring("deleted by someone else"))
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventPodDeleted, "was deleted"))
		st := get(s).Status.Restarts
		Expect(st.Total).To(BeZero())
		Expect(st.ProbeFailures).To(BeZero(), "the deleted pod's failed probes are not the server's")

		release(pod)
		next := newPodAfter(s, pod)
		server.start()
		kubeletRuns(next, clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		Expect(get(s).Status.Restarts.Total).To(BeZero())
		Expect(eventsOf(s)).NotTo(ContainElement(HavePrefix(eventCrashed)))
	})

	It("says PodDeleted when an early-served pod is deleted outright while it is probed", func() {
		s := httpServer(ns, "early-deleted", server.port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := onePod(s)
		// Served on the controller's own probe, before the kubelet's Ready.
		kubeletStarts(pod, clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(10 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))

		prober.holdNext(func() { poke(s) })
		// Deleted with no grace period: gone before the reconcile that
		// probes it ends, and its server with it.
		server.stop()
		Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		close(prober.released)

		next := newPodAfter(s, pod)
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventPodDeleted, "was deleted by someone else"))
		server.start()
		kubeletStarts(next, clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		Expect(get(s).Status.Restarts.Total).To(BeZero())
	})
})
