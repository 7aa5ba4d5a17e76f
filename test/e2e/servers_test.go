//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

const everythingImage = "localhost/mcp-operator/everything-server:dev"

var nsSeq atomic.Int64

// namespace creates a namespace for one spec and deletes it afterwards (a
// real cluster's namespace controller removes what is in it). Like the
// samples' namespace, it enforces the restricted Pod Security Standard.
func namespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("e2e-%d-%d", GinkgoParallelProcess(), nsSeq.Add(1)),
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"},
	}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func() { Expect(k8sClient.Delete(ctx, ns)).To(Succeed()) })
	return ns.Name
}

func httpEverything(ns, name string) *mcpv1alpha1.MCPServer {
	return &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mcpv1alpha1.MCPServerSpec{
			Transport: mcpv1alpha1.TransportStreamableHTTP,
			Workload: &mcpv1alpha1.Workload{
				Image: everythingImage, Args: []string{"-http=:8080", "-stateless=false"},
				Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("96Mi")}},
			},
		},
	}
}

func get(s *mcpv1alpha1.MCPServer) *mcpv1alpha1.MCPServer {
	var out mcpv1alpha1.MCPServer
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &out)).To(Succeed())
	return &out
}

func ready(s *mcpv1alpha1.MCPServer) func() string {
	return func() string {
		c := meta.FindStatusCondition(get(s).Status.Conditions, mcpv1alpha1.ConditionReady)
		if c == nil {
			return ""
		}
		return string(c.Status) + "/" + c.Reason
	}
}

func update(s *mcpv1alpha1.MCPServer, change func(*mcpv1alpha1.MCPServer)) {
	EventuallyWithOffset(1, func() error {
		cur := get(s)
		change(cur)
		return k8sClient.Update(ctx, cur)
	}).Should(Succeed())
}

// runningPod waits for the server's one running pod.
func runningPod(s *mcpv1alpha1.MCPServer) *corev1.Pod {
	var pod corev1.Pod
	EventuallyWithOffset(1, func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels{mcpv1alpha1.ServerLabel: s.Name})).To(Succeed())
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodRunning {
				live = append(live, p)
			}
		}
		g.Expect(live).To(HaveLen(1))
		pod = live[0]
	}).WithTimeout(90 * time.Second).Should(Succeed())
	return &pod
}

func podCount(s *mcpv1alpha1.MCPServer) func() int {
	return func() int {
		var pods corev1.PodList
		Expect(k8sClient.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels{mcpv1alpha1.ServerLabel: s.Name})).To(Succeed())
		return len(pods.Items)
	}
}

// containerCgroup finds the server container's memory cgroup on this node
// (cgroup v1 or v2).
func containerCgroup(pod *corev1.Pod) string {
	id := ""
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "server" {
			id = strings.TrimPrefix(cs.ContainerID, "containerd://")
		}
	}
	ExpectWithOffset(1, id).NotTo(BeEmpty())
	uid := string(pod.UID)
	for _, pattern := range []string{
		"/sys/fs/cgroup/memory/kubepods/*/pod" + uid + "/" + id,
		"/sys/fs/cgroup/memory/kubepods/pod" + uid + "/" + id,
		"/sys/fs/cgroup/kubepods*/*/*pod" + strings.ReplaceAll(uid, "-", "_") + "*/*" + id + "*",
		"/sys/fs/cgroup/kubepods/*/pod" + uid + "/" + id,
		"/sys/fs/cgroup/kubepods/pod" + uid + "/" + id,
	} {
		if m, _ := filepath.Glob(pattern); len(m) == 1 {
			return m[0]
		}
	}
	Fail("no cgroup found for container " + id)
	return ""
}

func memoryLimit(cgroup string) int64 {
	for _, f := range []string{"memory.limit_in_bytes", "memory.max"} {
		if data, err := os.ReadFile(filepath.Join(cgroup, f)); err == nil {
			n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
			Expect(err).NotTo(HaveOccurred())
			return n
		}
	}
	Fail("no memory limit file in " + cgroup)
	return 0
}

// killServer kills every process of the server's container, as a crash would.
func killServer(pod *corev1.Pod) {
	data, err := os.ReadFile(filepath.Join(containerCgroup(pod), "cgroup.procs"))
	Expect(err).NotTo(HaveOccurred())
	pids := strings.Fields(string(data))
	Expect(pids).NotTo(BeEmpty())
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		Expect(err).NotTo(HaveOccurred())
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func events(s *mcpv1alpha1.MCPServer) []string {
	var list eventsv1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(s.Namespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "MCPServer" && e.Regarding.Name == s.Name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

var _ = Describe("MCP servers in real pods", Label("servers"), func() {
	It("runs a stdio server nobody here wrote behind the adapter and publishes its catalog", func() {
		ns := namespace()
		s := &mcpv1alpha1.MCPServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stdio"},
			Spec: mcpv1alpha1.MCPServerSpec{
				Transport: mcpv1alpha1.TransportStdio,
				Workload:  &mcpv1alpha1.Workload{Image: everythingImage, Command: []string{"/everything-server"}},
			},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
		st := get(s).Status
		Expect(st.ToolCount).To(BeNumerically(">", 0))
		Expect(st.Tools[0].Name).To(HavePrefix("mcp.stdio."))
		Expect(st.ServerInfo.ProtocolVersion).NotTo(BeEmpty())
		pod := runningPod(s)
		// The adapter's container stays up, idle, beside the server.
		Expect(pod.Status.InitContainerStatuses).To(ConsistOf(And(HaveField("State.Running", Not(BeNil())), HaveField("RestartCount", BeZero()))))
	})

	It("gives an HTTP server's container the memory limit of its spec, in its cgroup", func() {
		ns := namespace()
		s := httpEverything(ns, "limited")
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
		Expect(memoryLimit(containerCgroup(runningPod(s)))).To(Equal(int64(96 << 20)))
	})

	It("restarts a killed server with its catalog, gives up after the 4th crash, and leaves other servers alone", func() {
		ns := namespace()
		bystander := httpEverything(ns, "bystander")
		crashy := httpEverything(ns, "crashy")
		Expect(k8sClient.Create(ctx, bystander)).To(Succeed())
		Expect(k8sClient.Create(ctx, crashy)).To(Succeed())
		Eventually(ready(crashy)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
		digest := get(crashy).Status.CatalogDigest

		for crash := 1; crash <= 3; crash++ {
			pod := runningPod(crashy)
			killServer(pod)
			Eventually(func() int32 { return get(crashy).Status.Restarts.Total }).WithTimeout(30 * time.Second).Should(BeEquivalentTo(crash))
			Eventually(ready(crashy)).WithTimeout(60 * time.Second).Should(Equal("True/Serving"))
			Expect(runningPod(crashy).Name).NotTo(Equal(pod.Name), "a restart is a new pod")
			Expect(get(crashy).Status.CatalogDigest).To(Equal(digest), "the catalog stayed through the restart")
		}
		Expect(events(crashy)).To(ContainElements(
			HavePrefix("Crashed: mcp.server.crashed: Error (exit code 137)"),
			HavePrefix("Restarting: mcp.server.restarting: restart 3 of 3"),
		))

		killServer(runningPod(crashy))
		Eventually(ready(crashy)).WithTimeout(30 * time.Second).Should(Equal("False/PermanentlyFailed"))
		Eventually(podCount(crashy)).WithTimeout(30 * time.Second).Should(BeZero())
		Expect(get(crashy).Status.Tools).To(BeEmpty())
		Eventually(func() []string { return events(crashy) }).Should(ContainElement(HavePrefix("PermanentlyFailed: mcp.server.permanently_failed")))
		Consistently(ready(bystander)).WithTimeout(3 * time.Second).Should(Equal("True/Serving"))
	})

	It("counts an OOM kill by the container's memory limit as a crash", func() {
		ns := namespace()
		s := &mcpv1alpha1.MCPServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hog"},
			Spec: mcpv1alpha1.MCPServerSpec{
				Transport: mcpv1alpha1.TransportStreamableHTTP,
				Workload: &mcpv1alpha1.Workload{
					Image:     "localhost/mcp-operator/memhog:dev",
					Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}},
				},
				RestartPolicy: mcpv1alpha1.RestartPolicy{MaxRestarts: ptr.To(int32(0))},
			},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("False/PermanentlyFailed"))
		Expect(get(s).Status.Restarts.LastExitReason).To(Equal("OOMKilled"))
		Expect(events(s)).To(ContainElement(HavePrefix("Crashed: mcp.server.crashed: OOMKilled")))
	})

	It("suspends a server within seconds: pod gone, tools withdrawn", func() {
		ns := namespace()
		s := httpEverything(ns, "pausable")
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
		update(s, func(cur *mcpv1alpha1.MCPServer) { cur.Spec.Suspend = true })
		Eventually(ready(s)).WithTimeout(10 * time.Second).Should(Equal("False/Suspended"))
		Expect(get(s).Status.Tools).To(BeEmpty())
		Eventually(podCount(s)).WithTimeout(20 * time.Second).Should(BeZero())
		Eventually(func() []string { return events(s) }).Should(ContainElement(HavePrefix("Shutdown: mcp.server.shutdown")))
	})
})
