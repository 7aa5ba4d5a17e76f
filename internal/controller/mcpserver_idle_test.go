package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// A probe that finds nothing new writes no status: the time of the last
// successful probe is a metric, and status.lastProbeTime moves only with
// another change or once an hour.
var _ = Describe("An idle server", func() {
	It("costs no status write per probe", func() {
		ns := createNamespace()
		clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
		startManager([]string{ns}, reconcilerFor(clk))
		s := httpServer(ns, "quiet", testpeers.NodeEverything(GinkgoT()).Port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		readyServing(s, clk)
		// The first update by a client writes the API server's defaults
		// into the spec: a new generation, and so a status write.
		poke(s)
		Eventually(func() bool { cur := get(s); return cur.Status.ObservedGeneration == cur.Generation }).Should(BeTrue())
		before := get(s).Status
		Expect(before.LastProbeTime).NotTo(BeNil())

		probedAt := func() *float64 {
			return serverMetric("mcp_operator_server_last_probe_success_timestamp_seconds", ns, s.Name)
		}
		clk.Step(10 * time.Minute)
		poke(s) // a reconcile, and so a probe, now
		Eventually(probedAt).Should(HaveValue(BeNumerically("==", float64(clk.Now().Unix()))))
		Consistently(func() mcpv1alpha1.MCPServerStatus { return get(s).Status }).WithTimeout(time.Second).Should(Equal(before))

		clk.Step(time.Hour)
		poke(s)
		Eventually(func() time.Time { return get(s).Status.LastProbeTime.Time }).Should(BeTemporally("==", clk.Now()))
	})
})
