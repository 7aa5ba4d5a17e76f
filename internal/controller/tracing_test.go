package controller

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// The controller's spans, recorded in process by the SDK's span recorder,
// for a remote server (the go-sdk everything-server) on the real API
// server.
var _ = Describe("MCPServer controller traces", func() {
	It("makes a span of each reconcile, a child span of each phase, and span events of the Events", func() {
		ns := createNamespace()
		spans := tracetest.NewSpanRecorder()
		provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		DeferCleanup(func() { _ = provider.Shutdown(ctx) })
		clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
		startManager([]string{ns}, func(mgr ctrl.Manager) error {
			return (&MCPServerReconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("mcp-operator"),
				Prober: NewMCPProber(), Clock: clk, Tracer: provider.Tracer("controller-test"),
			}).SetupWithManager(mgr, Options{MaxConcurrentReconciles: 1})
		})
		up := testpeers.GoEverything(GinkgoT(), false)
		s := &mcpv1alpha1.MCPServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "traced"},
			Spec: mcpv1alpha1.MCPServerSpec{
				Transport: mcpv1alpha1.TransportStreamableHTTP,
				Remote: &mcpv1alpha1.Remote{
					URL:  fmt.Sprintf("http://127.0.0.1:%d/mcp", up.Port),
					Auth: &mcpv1alpha1.RemoteAuth{BearerTokenSecretRef: &mcpv1alpha1.SecretKeySelector{Name: "token", Key: "token"}},
				},
			},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		// Without its Secret the probe phase stalls: its span names the
		// reason, and the reconcile's span has the Warning as an event.
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonCredentialsMissing))
		Eventually(func() *float64 { return serverMetric("mcp_operator_server_ready", ns, "traced") }).WithTimeout(30 * time.Second).Should(HaveValue(BeZero()))
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, StringData: map[string]string{"token": "s3cret"}})).To(Succeed())
		poke(s)
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		Eventually(func() *float64 { return serverMetric("mcp_operator_server_ready", ns, "traced") }).WithTimeout(30 * time.Second).Should(HaveValue(BeEquivalentTo(1)))

		// reconciles are the names of the child spans of each reconcile of s,
		// with the reason a phase span names, in the order they ended.
		type reconcileSpan struct {
			Phases []string
			Events []string
		}
		reconciles := func() []reconcileSpan {
			var out []reconcileSpan
			ended := spans.Ended()
			for _, r := range ended {
				a := map[string]string{}
				for _, kv := range r.Attributes() {
					a[string(kv.Key)] = kv.Value.String()
				}
				if r.Name() != "reconcile MCPServer" || a["k8s.namespace.name"] != ns || a["mcp_operator.server"] != "traced" {
					continue
				}
				var rs reconcileSpan
				for _, p := range ended {
					if p.Parent().SpanID() != r.SpanContext().SpanID() {
						continue
					}
					name := p.Name()
					for _, kv := range p.Attributes() {
						if kv.Key == "mcp_operator.reason" {
							name += ":" + kv.Value.String()
						}
					}
					rs.Phases = append(rs.Phases, name)
				}
				for _, e := range r.Events() {
					rs.Events = append(rs.Events, e.Name)
				}
				out = append(out, rs)
			}
			return out
		}
		Eventually(reconciles).WithTimeout(30 * time.Second).Should(ContainElement(reconcileSpan{
			Phases: []string{"name check", "suspend", "probe:CredentialsMissing"},
			Events: []string{mcpv1alpha1.ReasonCredentialsMissing},
		}))
		Eventually(reconciles).WithTimeout(30 * time.Second).Should(ContainElement(HaveField("Phases", []string{"name check", "suspend", "probe", "publish"})))
	})
})

// serverMetric is the value of the controller's metric name for a server,
// as the controller's registry exports it; nil when it exports none.
func serverMetric(name, namespace, server string) *float64 {
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == namespace && labels["server"] == server {
				v := m.GetGauge().GetValue()
				if m.GetCounter() != nil {
					v = m.GetCounter().GetValue()
				}
				return &v
			}
		}
	}
	return nil
}
