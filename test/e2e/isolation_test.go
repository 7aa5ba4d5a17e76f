//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// The isolation specs look at connections from inside real pods with
// netcheck (test/e2e/netcheck), whose image also holds the everything-server,
// so a server pod made by the controller can run it.
const netcheckImage = "localhost/mcp-operator/netcheck:dev"

// "Outside the cluster": a network namespace this suite makes on the node,
// joined to it by a veth pair, with listeners on two addresses of a
// documentation range (RFC 5737) that nothing else here uses.
const (
	extNetns   = "mcp-e2e-ext"
	extHostIf  = "mcpe2e0"
	extNsIf    = "mcpe2e1"
	extGateway = "203.0.113.1" // the node's end
	extAddr    = "203.0.113.2" // TCP 8443 and 9443, DNS on UDP 53
	extOther   = "203.0.113.3" // TCP 8443: outside an allow-list of extAddr/32
)

// Outcomes netcheck prints. A dropped connection times out; "refused" would
// mean it reached its host.
const (
	connected = "connected"
	dropped   = "timeout"
)

// externalNetwork makes the outside network namespace with its listeners and
// removes it after the specs.
func externalNetwork() {
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	Expect(os.Geteuid()).To(BeZero(), "the e2e suite runs as root on the dev cluster's node: it makes a network namespace")
	netcheck := filepath.Join(root, "bin", "netcheck")
	Expect(netcheck).To(BeAnExistingFile(), "make images builds bin/netcheck")

	removeExternalNetwork() // a run that was killed may have left it
	for _, args := range [][]string{
		{"netns", "add", extNetns},
		{"link", "add", extHostIf, "type", "veth", "peer", "name", extNsIf},
		{"link", "set", extNsIf, "netns", extNetns},
		{"addr", "add", extGateway + "/24", "dev", extHostIf},
		{"link", "set", extHostIf, "up"},
		{"-n", extNetns, "addr", "add", extAddr + "/24", "dev", extNsIf},
		{"-n", extNetns, "addr", "add", extOther + "/24", "dev", extNsIf},
		{"-n", extNetns, "link", "set", extNsIf, "up"},
		{"-n", extNetns, "link", "set", "lo", "up"},
	} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "ip %s: %s", strings.Join(args, " "), out)
	}
	DeferCleanup(removeExternalNetwork)

	server := exec.Command("ip", "netns", "exec", extNetns, netcheck, "serve",
		"-tcp", strings.Join([]string{extAddr + ":8443", extAddr + ":9443", extOther + ":8443"}, ","),
		"-dns", extAddr+":53", "-answer", extAddr)
	server.Stdout, server.Stderr = GinkgoWriter, GinkgoWriter
	Expect(server.Start()).To(Succeed())
	DeferCleanup(func() {
		_ = server.Process.Kill()
		_ = server.Wait()
	})
	// From the node (root, which the dev cluster's enforcement leaves alone)
	// every listener answers: what pods can't reach is the policy's doing.
	Eventually(func() error {
		for _, a := range []string{extAddr + ":8443", extAddr + ":9443", extOther + ":8443"} {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				return err
			}
			c.Close()
		}
		return nil
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

func removeExternalNetwork() {
	_ = exec.Command("ip", "netns", "delete", extNetns).Run()
	_ = exec.Command("ip", "link", "delete", extHostIf).Run()
}

// isolatedServer is an HTTP everything-server in the served namespace, in an
// image that also holds netcheck, with the given network settings.
func isolatedServer(name string, network mcpv1alpha1.NetworkSpec) *mcpv1alpha1.MCPServer {
	s := &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: name},
		Spec: mcpv1alpha1.MCPServerSpec{
			Transport: mcpv1alpha1.TransportStreamableHTTP,
			Workload: &mcpv1alpha1.Workload{
				Image: netcheckImage, Command: []string{"/everything-server"}, Args: []string{"-http=:8080", "-stateless=false"},
				Network: network,
			},
		},
	}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, s) })
	return s
}

// neighbourPod is a pod in the served namespace that is no MCP server: it
// listens on 8080 and has no NetworkPolicy of its own. It passes the
// restricted Pod Security Standard the namespace enforces.
func neighbourPod() *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: "iso-neighbour"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			Containers: []corev1.Container{{
				Name: "netcheck", Image: netcheckImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/netcheck", "serve", "-tcp", ":8080"},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
		},
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, pod) })
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
	}).WithTimeout(60 * time.Second).Should(Succeed())
	return pod
}

// execIn runs a command in a container of a running pod (kubectl exec) and
// returns its output.
func execIn(pod *corev1.Pod, container string, command ...string) string {
	args := append(slices.Clone(kubectl[1:]), "-n", pod.Namespace, "exec", pod.Name, "-c", container, "--")
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl[0], append(args, command...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	ExpectWithOffset(2, err).NotTo(HaveOccurred(), "exec %v in %s: %s", command, pod.Name, stderr.String())
	return string(out)
}

// dial opens a TCP connection from inside the pod to each address at once and
// tells, per address, whether it connected or was dropped.
func dial(pod *corev1.Pod, container string, addrs ...string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(execIn(pod, container, append([]string{"/netcheck", "dial"}, addrs...)...)), "\n") {
		addr, outcome, _ := strings.Cut(line, " ")
		out[addr] = outcome
	}
	return out
}

// lookup asks the outside DNS server for a name from inside the pod.
func lookup(pod *corev1.Pod, container string) string {
	return strings.TrimSpace(execIn(pod, container, "/netcheck", "lookup", extAddr, "mcp-e2e.example"))
}

// operatorPod is a running pod of the operator's component and the address
// of its port named portName.
func operatorPod(component, portName string) string {
	pods, err := clientset.CoreV1().Pods(bridgeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + component})
	Expect(err).NotTo(HaveOccurred())
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			continue
		}
		for _, port := range p.Spec.Containers[0].Ports {
			if port.Name == portName {
				return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort)))
			}
		}
	}
	Fail(fmt.Sprintf("no running %s pod with a port named %s", component, portName))
	return ""
}

// apiServerAddresses are the API server's Service address and the address
// it listens on itself (the endpoint of Service default/kubernetes).
func apiServerAddresses() (service, endpoint string) {
	var svc corev1.Service
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &svc)).To(Succeed())
	eps, err := clientset.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	Expect(err).NotTo(HaveOccurred())
	Expect(eps.Items).NotTo(BeEmpty())
	s := eps.Items[0]
	return net.JoinHostPort(svc.Spec.ClusterIP, "443"),
		net.JoinHostPort(s.Endpoints[0].Addresses[0], strconv.Itoa(int(*s.Ports[0].Port)))
}

func mcpAddr(pod *corev1.Pod) string { return net.JoinHostPort(pod.Status.PodIP, "8080") }

// Each spec checks both sides: a connection the policy allows succeeds from
// the same pod (or to the same target) as one it forbids fails, so a broken
// network can't pass for enforcement.
var _ = Describe("isolation of MCP servers on the dev cluster's network", Ordered, Label("isolation"), func() {
	var (
		clusterPod, internetPod, dnsPod, nonePod, allowPod, neighbour *corev1.Pod
		dnsServer                                                     *mcpv1alpha1.MCPServer
	)

	BeforeAll(func() {
		externalNetwork()
		servers := []*mcpv1alpha1.MCPServer{
			isolatedServer("iso-cluster", mcpv1alpha1.NetworkSpec{Egress: mcpv1alpha1.EgressCluster}),
			isolatedServer("iso-internet", mcpv1alpha1.NetworkSpec{Egress: mcpv1alpha1.EgressInternet}),
			isolatedServer("iso-dns", mcpv1alpha1.NetworkSpec{Egress: mcpv1alpha1.EgressDNS}),
			isolatedServer("iso-none", mcpv1alpha1.NetworkSpec{Egress: mcpv1alpha1.EgressNone}),
			isolatedServer("iso-allow", mcpv1alpha1.NetworkSpec{Egress: mcpv1alpha1.EgressNone, EgressAllow: []mcpv1alpha1.EgressRule{
				{CIDR: extAddr + "/32", Ports: []mcpv1alpha1.EgressPort{{Port: 8443}}},
			}}),
		}
		neighbour = neighbourPod()
		// Ready means the controller's probe reached each server's port.
		for _, s := range servers {
			Eventually(ready(s)).WithTimeout(120*time.Second).Should(Equal("True/Serving"), s.Name)
		}
		pods := make([]*corev1.Pod, len(servers))
		for i, s := range servers {
			pods[i] = runningPod(s)
		}
		clusterPod, internetPod, dnsPod, nonePod, allowPod = pods[0], pods[1], pods[2], pods[3], pods[4]
		dnsServer = servers[2]
	})

	It("keeps a server pod from other servers' pods, the API server and the operator's pods", func() {
		apiService, apiEndpoint := apiServerAddresses()
		bridge, controller := operatorPod("bridge", "http"), operatorPod("controller", "health")
		forbidden := []string{mcpAddr(dnsPod), apiService, apiEndpoint, bridge, controller}

		By("a pod that is no MCP server reaches all of them but the server")
		Expect(dial(neighbour, "netcheck", forbidden...)).To(Equal(map[string]string{
			mcpAddr(dnsPod): dropped, apiService: connected, apiEndpoint: connected, bridge: connected, controller: connected,
		}))

		By("a server with Cluster egress reaches that pod, and none of them")
		Expect(dial(clusterPod, "server", append(forbidden, mcpAddr(neighbour))...)).To(Equal(map[string]string{
			mcpAddr(neighbour): connected,
			mcpAddr(dnsPod):    dropped, apiService: dropped, apiEndpoint: dropped, bridge: dropped, controller: dropped,
		}))

		By("a server with Internet egress reaches outside the cluster, and none of them")
		Expect(dial(internetPod, "server", append(forbidden, extAddr+":8443")...)).To(Equal(map[string]string{
			extAddr + ":8443": connected,
			mcpAddr(dnsPod):   dropped, apiService: dropped, apiEndpoint: dropped, bridge: dropped, controller: dropped,
		}))
	})

	It("lets only the bridge and the controller's probe reach a server's port", func() {
		By("the controller's probe and the bridge reach it: a call through the bridge works")
		Expect(ready(dnsServer)()).To(Equal("True/Serving"))
		createAgent("iso-agent", []mcpv1alpha1.ToolRule{{Tools: []string{"mcp.iso-dns.test_simple_text"}, Decision: mcpv1alpha1.DecisionAllow}})
		call := stepOf(runAgent("iso-agent", "mcp.iso-dns.test_simple_text"), "call", "mcp.iso-dns.test_simple_text")
		Expect(call.Error).To(BeEmpty())
		Expect(string(call.Result)).To(ContainSubstring("[mcp:iso-dns:test_simple_text]"))

		By("another pod of the same namespace does not, though it reaches a pod with no policy")
		Expect(dial(neighbour, "netcheck", mcpAddr(dnsPod), mcpAddr(neighbour))).To(Equal(map[string]string{
			mcpAddr(dnsPod): dropped, mcpAddr(neighbour): connected,
		}))
	})

	It("drops a connection outside the cluster with egress None, which Internet egress lets through", func() {
		target := extAddr + ":8443"
		Expect(dial(internetPod, "server", target)).To(HaveKeyWithValue(target, connected))
		Expect(dial(nonePod, "server", target)).To(HaveKeyWithValue(target, dropped))
		Expect(dial(dnsPod, "server", target)).To(HaveKeyWithValue(target, dropped), "DNS egress is lookups only")
	})

	It("lets through exactly what an egress allow-list lists, by CIDR and port", func() {
		listed, otherPort, otherAddr := extAddr+":8443", extAddr+":9443", extOther+":8443"
		Expect(dial(allowPod, "server", listed, otherPort, otherAddr)).To(Equal(map[string]string{
			listed: connected, otherPort: dropped, otherAddr: dropped,
		}))
		By("the unlisted port and address answer a server allowed everywhere outside")
		Expect(dial(internetPod, "server", otherPort, otherAddr)).To(Equal(map[string]string{
			otherPort: connected, otherAddr: connected,
		}))
	})

	It("answers DNS lookups when the egress mode allows them and drops them when not", func() {
		answer := "answer: " + extAddr
		Expect(lookup(dnsPod, "server")).To(Equal(answer), "DNS")
		Expect(lookup(clusterPod, "server")).To(Equal(answer), "Cluster includes DNS")
		Expect(lookup(nonePod, "server")).To(Equal(dropped), "None")
		Expect(lookup(allowPod, "server")).To(Equal(dropped), "None with an allow-list that lists no DNS")
	})
})
