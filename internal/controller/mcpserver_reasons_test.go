package controller

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// Ready=False says what to fix. envtest runs no scheduler and no kubelet, so
// these specs write the pod status the scheduler or the kubelet writes in
// each case (the messages are theirs, as seen on a real node); the e2e suite
// shows the image-pull case on a real node.
var _ = Describe("MCPServer status says what to fix", func() {
	var ns string
	BeforeEach(func() {
		ns = createNamespace()
		startManager([]string{ns}, reconcilerFor(clocktesting.NewFakeClock(time.Now().Truncate(time.Second))))
	})

	// kubeletWaits writes the status of a pod whose server container waits.
	kubeletWaits := func(pod *corev1.Pod, reason, message string) {
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: serverContainer, Image: pod.Spec.Containers[0].Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
			}},
		}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
	}
	readyMessage := func(s *mcpv1alpha1.MCPServer) func() string {
		return func() string {
			if c := condition(s, mcpv1alpha1.ConditionReady)(); c != nil {
				return c.Reason + ": " + c.Message
			}
			return ""
		}
	}

	It("names the image and the runtime's error when the image cannot be pulled, the same through the kubelet's backoff", func() {
		s := httpServer(ns, "nopull", testkit.FreePort(GinkgoT()))
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := onePod(s)
		runtimeErr := `failed to pull and unpack image "example.com/everything:1": failed to resolve reference "example.com/everything:1": example.com/everything:1: not found`
		kubeletWaits(pod, "ErrImagePull", "rpc error: code = NotFound desc = "+runtimeErr)
		want := `ImagePullFailed: image "example.com/everything:1" of container server cannot be pulled: rpc error: code = NotFound desc = ` + runtimeErr
		Eventually(readyMessage(s)).Should(Equal(want))

		// The kubelet's next state wraps the same error; status stays as it is.
		kubeletWaits(onePod(s), "ImagePullBackOff", `Back-off pulling image "example.com/everything:1": ErrImagePull: rpc error: code = NotFound desc = `+runtimeErr)
		Consistently(readyMessage(s)).WithTimeout(time.Second).Should(Equal(want))
		Expect(eventsOf(s)).To(ConsistOf(HavePrefix("ImagePullFailed: image \"example.com/everything:1\"")))
	})

	It("names the missing Secret when the container cannot be created", func() {
		s := httpServer(ns, "nosecret", testkit.FreePort(GinkgoT()))
		s.Spec.Workload.Env = []corev1.EnvVar{{Name: "API_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "api-token"}, Key: "token"}}}}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		kubeletWaits(onePod(s), "CreateContainerConfigError", `secret "api-token" not found`)
		Eventually(readyMessage(s)).Should(Equal(`ContainerConfigError: container server cannot be created: secret "api-token" not found`))
		Expect(get(s).Status.Endpoint).To(BeNil())
	})

	It("gives the scheduler's message when no node can take the pod", func() {
		s := httpServer(ns, "toobig", testkit.FreePort(GinkgoT()))
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := onePod(s)
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		}}}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		Eventually(readyMessage(s)).Should(Equal("Unschedulable: no node can run the server's pod: 0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."))
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith("Unschedulable", "Insufficient memory"))
	})

	It("names the memory limit an OOM-killed server hit", func() {
		s := httpServer(ns, "hungry", testkit.FreePort(GinkgoT()))
		s.Spec.Workload.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("96Mi")}}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		kubeletSeesExit(onePod(s), 137, "OOMKilled")
		Eventually(readyMessage(s)).Should(And(HavePrefix("Restarting: crashed (OOMKilled: "), ContainSubstring("memory limit of 96Mi")))
		Expect(get(s).Status.Restarts.LastExitReason).To(Equal("OOMKilled"))
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith("Crashed", "mcp.server.crashed: OOMKilled: container server used all of its memory limit of 96Mi"))
	})

	It("gives the MCP error of a probe that fails, and counts failed probes in status", func() {
		// A server that answers every request with a JSON-RPC error: a fault
		// no real server here produces on demand.
		broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32603,"message":"database unavailable"}}`))
		}))
		DeferCleanup(broken.Close)
		u, err := url.Parse(broken.URL)
		Expect(err).NotTo(HaveOccurred())
		port, err := strconv.Atoi(u.Port())
		Expect(err).NotTo(HaveOccurred())

		s := httpServer(ns, "broken", port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		kubeletRuns(onePod(s), time.Now())
		Eventually(readyMessage(s)).Should(And(HavePrefix("ProbeFailed: probe failed: "), ContainSubstring("database unavailable")))
		Eventually(func() int32 { return get(s).Status.Restarts.ProbeFailures }).Should(BeNumerically(">=", 1))
		// Three in a row are a crash, and the count starts again.
		Eventually(func() string { return get(s).Status.Restarts.LastExitReason }).WithTimeout(30 * time.Second).
			Should(And(HavePrefix("ProbeFailed (3 probes in a row"), ContainSubstring("database unavailable")))
		Expect(get(s).Status.Restarts.ProbeFailures).To(BeZero())
	})
})
