package controller

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// closingListener is a loopback port where a server's container "runs" but
// answers nothing: each connection is closed at once, and counted.
func closingListener() (int, *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(ln.Close)
	var accepts atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, &accepts
}

// probesIn counts the connections a closingListener gets in d.
func probesIn(accepts *atomic.Int32, d time.Duration) func() int32 {
	return func() int32 {
		before := accepts.Load()
		time.Sleep(d)
		return accepts.Load() - before
	}
}

// countingClient counts the API writes a reconciler sends: creates,
// updates, patches, applies and deletes, of objects and of their status.
type countingClient struct {
	client.Client
	writes *atomic.Int32
}

func (c countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.writes.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.writes.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

func (c countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.writes.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.writes.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.writes.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c countingClient) Status() client.SubResourceWriter {
	return countingStatus{c.Client.Status(), c.writes}
}

type countingStatus struct {
	client.SubResourceWriter
	writes *atomic.Int32
}

func (c countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	c.writes.Add(1)
	return c.SubResourceWriter.Update(ctx, obj, opts...)
}

func (c countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	c.writes.Add(1)
	return c.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// countingReader counts the uncached reads (Secrets, the activity Lease).
type countingReader struct {
	client.Reader
	gets *atomic.Int32
}

func (c countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

var _ = Describe("Early probes", func() {
	var (
		ns            string
		clk           *clocktesting.FakeClock
		writes, reads atomic.Int32
	)
	BeforeEach(func() {
		ns = createNamespace()
		clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
		writes.Store(0)
		reads.Store(0)
		startManager([]string{ns}, func(mgr ctrl.Manager) error {
			r := testReconciler(mgr, clk)
			r.Client = countingClient{mgr.GetClient(), &writes}
			r.APIReader = countingReader{mgr.GetAPIReader(), &reads}
			return r.SetupWithManager(mgr, Options{MaxConcurrentReconciles: 2})
		})
	})

	It("send no API write and read the server's Secrets once while they retry, and end by count when the clock stands still", func() {
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}, StringData: map[string]string{"token": "early-secret-value"}})).To(Succeed())
		port, accepts := closingListener()
		s := httpServer(ns, "early-quiet", port)
		s.Spec.Workload.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "api"}, Key: "token"}}}}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		kubeletStarts(onePod(s), clk.Now())

		// The first probe's reconcile applies the Service and NetworkPolicy
		// and reads the Secret; by the third probe it is done.
		Eventually(accepts.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 3))
		w, r := writes.Load(), reads.Load()
		Eventually(accepts.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 10))
		Expect(writes.Load()).To(Equal(w), "API writes during the early retries")
		Expect(reads.Load()).To(Equal(r), "uncached reads during the early retries")
		Expect(condition(s, mcpv1alpha1.ConditionReady)()).To(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonStarting))

		// The fake clock stands still, as a controller's clock behind the
		// node's would: the retries end after earlyProbeRetries.
		Eventually(probesIn(accepts, time.Second)).WithTimeout(15 * time.Second).Should(BeZero())
		// A probe that gets no answer opens up to two connections.
		Expect(accepts.Load()).To(BeNumerically("<=", 2*(earlyProbeRetries+3)))
	})
})
