package controller

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

var testOpts = WorkloadOptions{
	OperatorImage: "localhost/mcp-operator/manager:dev", OperatorNamespace: "mcp-system",
	APIServerAddresses: []string{"10.0.0.5", "192.0.2.2", "2001:db8::1"},
}

func server(transport mcpv1alpha1.Transport, w mcpv1alpha1.Workload) *mcpv1alpha1.MCPServer {
	return &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Name: "fs", Namespace: "team-a"},
		Spec:       mcpv1alpha1.MCPServerSpec{Transport: transport, Workload: &w},
	}
}

func TestPodIsHardenedAndOwnsNoRestarts(t *testing.T) {
	pod := buildPod(server(mcpv1alpha1.TransportStreamableHTTP, mcpv1alpha1.Workload{Image: "img", Port: 9000}), testOpts)
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q, want Never", pod.Spec.RestartPolicy)
	}
	if !ptr.Deref(pod.Spec.SecurityContext.RunAsNonRoot, false) || *pod.Spec.SecurityContext.RunAsUser == 0 {
		t.Error("pod may run as root")
	}
	if ptr.Deref(pod.Spec.AutomountServiceAccountToken, true) {
		t.Error("ServiceAccount token is mounted")
	}
	if pod.Spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("seccomp is not RuntimeDefault")
	}
	c := pod.Spec.Containers[0]
	sc := c.SecurityContext
	if ptr.Deref(sc.AllowPrivilegeEscalation, true) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context not hardened: %+v", sc)
	}
	if c.Ports[0].ContainerPort != 9000 || c.ReadinessProbe.TCPSocket == nil || c.ReadinessProbe.PeriodSeconds != 1 {
		t.Errorf("port %d, readiness %+v", c.Ports[0].ContainerPort, c.ReadinessProbe)
	}
	if pod.Name != "fs-0" || pod.Labels[mcpv1alpha1.ServerLabel] != "fs" {
		t.Errorf("name %q labels %v", pod.Name, pod.Labels)
	}
	if len(pod.Spec.InitContainers) != 0 {
		t.Error("an HTTP server got the stdio adapter")
	}
}

func TestStdioPodRunsTheCommandUnderTheAdapter(t *testing.T) {
	s := server(mcpv1alpha1.TransportStdio, mcpv1alpha1.Workload{Image: "node:22", Command: []string{"node", "server.js"}, Args: []string{"/data"}, Path: "/mcp", Port: 8080})
	s.Status.Restarts.Total = 2
	pod := buildPod(s, testOpts)
	c := pod.Spec.Containers[0]
	want := []string{adapterPath, "--listen", ":8080", "--path", "/mcp", "--", "node", "server.js"}
	if !slices.Equal(c.Command, want) || !slices.Equal(c.Args, []string{"/data"}) {
		t.Errorf("command %v args %v, want %v [/data]", c.Command, c.Args, want)
	}
	if c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("readiness %+v, want the adapter's /healthz", c.ReadinessProbe)
	}
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Image != testOpts.OperatorImage {
		t.Fatalf("init containers %+v", pod.Spec.InitContainers)
	}
	// A sidecar whose postStart hook installs the adapter: the kubelet starts
	// the server once the hook is done, not when it notices an exit.
	adapter := pod.Spec.InitContainers[0]
	if adapter.RestartPolicy == nil || *adapter.RestartPolicy != corev1.ContainerRestartPolicyAlways ||
		!slices.Equal(adapter.Command, []string{AdapterPath, "--hold"}) ||
		adapter.Lifecycle == nil || adapter.Lifecycle.PostStart == nil || adapter.Lifecycle.PostStart.Exec == nil ||
		!slices.Equal(adapter.Lifecycle.PostStart.Exec.Command, []string{AdapterPath, "--install", adapterPath}) {
		t.Errorf("adapter container %+v, want a sidecar holding while its postStart hook installs %s", adapter, adapterPath)
	}
	if pod.Name != "fs-2" {
		t.Errorf("pod name %q, want fs-2 (third incarnation)", pod.Name)
	}
}

func TestResourcesDefaultPerKey(t *testing.T) {
	q := resource.MustParse
	cases := []struct {
		name           string
		user           *corev1.ResourceRequirements
		reqMem, limMem string
		reqCPU, limCPU string
	}{
		{"unset", nil, "64Mi", "256Mi", "50m", "500m"},
		{"only a memory limit", &corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": q("1Gi")}}, "64Mi", "1Gi", "50m", "500m"},
		{"a request above the default limit raises the limit", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("512Mi")}}, "512Mi", "512Mi", "50m", "500m"},
		{"a limit below the default request lowers the request", &corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": q("20m")}}, "64Mi", "256Mi", "20m", "20m"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeResources(tc.user)
			for _, c := range []struct {
				list corev1.ResourceList
				name corev1.ResourceName
				want string
			}{{got.Requests, "memory", tc.reqMem}, {got.Limits, "memory", tc.limMem}, {got.Requests, "cpu", tc.reqCPU}, {got.Limits, "cpu", tc.limCPU}} {
				if v := c.list[c.name]; v.Cmp(q(c.want)) != 0 {
					t.Errorf("%s = %s, want %s", c.name, v.String(), c.want)
				}
			}
		})
	}
}

func TestNetworkPolicyEgress(t *testing.T) {
	cases := []struct {
		egress mcpv1alpha1.EgressPolicy
		rules  int
		check  func(*testing.T, []networkingv1.NetworkPolicyEgressRule)
	}{
		{mcpv1alpha1.EgressNone, 0, nil},
		{"", 1, nil},
		{mcpv1alpha1.EgressDNS, 1, func(t *testing.T, r []networkingv1.NetworkPolicyEgressRule) {
			if len(r[0].Ports) != 2 || r[0].Ports[0].Port.IntVal != 53 || len(r[0].To) != 0 {
				t.Errorf("DNS rule %+v", r[0])
			}
		}},
		{mcpv1alpha1.EgressCluster, 2, func(t *testing.T, r []networkingv1.NetworkPolicyEgressRule) {
			sel := r[1].To[0].PodSelector.MatchExpressions
			if sel[0].Key != mcpv1alpha1.ServerLabel || sel[0].Operator != metav1.LabelSelectorOpDoesNotExist {
				t.Errorf("cluster egress may reach other MCP servers: %+v", sel)
			}
			if sel[1].Key != "app.kubernetes.io/name" || sel[1].Operator != metav1.LabelSelectorOpNotIn || !slices.Equal(sel[1].Values, []string{"mcp-operator"}) {
				t.Errorf("cluster egress may reach the operator's pods (the bridge, the controller): %+v", sel)
			}
		}},
		{mcpv1alpha1.EgressInternet, 2, func(t *testing.T, r []networkingv1.NetworkPolicyEgressRule) {
			v4 := r[1].To[0].IPBlock.Except
			if !slices.Contains(v4, "10.0.0.0/8") {
				t.Errorf("internet egress reaches private ranges: %+v", r[1].To[0].IPBlock)
			}
			// testOpts' API server: 192.0.2.2 (public-looking) and 10.0.0.5
			// (already in 10.0.0.0/8), 2001:db8::1 on IPv6.
			if !slices.Contains(v4, "192.0.2.2/32") || slices.Contains(v4, "10.0.0.5/32") {
				t.Errorf("internet egress except %v, want the API server's public address and no redundant private one", v4)
			}
			if v6 := r[1].To[1].IPBlock.Except; !slices.Contains(v6, "2001:db8::1/128") || !slices.Contains(v6, "fc00::/7") {
				t.Errorf("internet egress IPv6 except %v", v6)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.egress), func(t *testing.T) {
			np := buildNetworkPolicy(server(mcpv1alpha1.TransportStreamableHTTP, mcpv1alpha1.Workload{Image: "i", Port: 8080, Network: mcpv1alpha1.NetworkSpec{Egress: tc.egress}}), testOpts)
			if len(np.Spec.Egress) != tc.rules {
				t.Fatalf("%d egress rules, want %d", len(np.Spec.Egress), tc.rules)
			}
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				t.Error("egress not restricted")
			}
			if tc.check != nil {
				tc.check(t, np.Spec.Egress)
			}
			from := np.Spec.Ingress[0].From[0]
			if from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "mcp-system" ||
				!slices.Equal(from.PodSelector.MatchExpressions[0].Values, []string{"bridge", "controller"}) {
				t.Errorf("ingress from %+v, want only the operator's bridge and controller", from)
			}
			if np.Spec.Ingress[0].Ports[0].Port.IntVal != 8080 {
				t.Error("ingress not limited to the MCP port")
			}
		})
	}
}

func TestNetworkPolicyEgressAllow(t *testing.T) {
	w := mcpv1alpha1.Workload{Image: "i", Network: mcpv1alpha1.NetworkSpec{
		Egress: mcpv1alpha1.EgressNone,
		EgressAllow: []mcpv1alpha1.EgressRule{
			{CIDR: "203.0.113.2/32", Ports: []mcpv1alpha1.EgressPort{{Port: 8443}, {Port: 5353, Protocol: corev1.ProtocolUDP}}},
			{CIDR: "198.51.100.0/24", Ports: []mcpv1alpha1.EgressPort{{Port: 443, Protocol: corev1.ProtocolTCP}}},
		},
	}}
	np := buildNetworkPolicy(server(mcpv1alpha1.TransportStreamableHTTP, w), testOpts)
	var got []string
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			got = append(got, fmt.Sprintf("%s %s/%d", r.To[0].IPBlock.CIDR, *p.Protocol, p.Port.IntVal))
		}
	}
	want := []string{"203.0.113.2/32 TCP/8443", "203.0.113.2/32 UDP/5353", "198.51.100.0/24 TCP/443"}
	if !slices.Equal(got, want) {
		t.Errorf("egress with None and an allow-list: %v, want exactly %v", got, want)
	}
}
