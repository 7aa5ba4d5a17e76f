package controller

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// WorkloadOptions are the operator-wide settings the workload builders need.
type WorkloadOptions struct {
	// OperatorImage holds the stdio adapter binary at AdapterPath; in stdio
	// server pods, a sidecar of this image installs it next to the server.
	OperatorImage string
	// OperatorNamespace is where the bridge and controller pods run; only they
	// may connect to server pods.
	OperatorNamespace string
	// APIServerAddresses are the Kubernetes API server's own addresses (the
	// endpoints of Service default/kubernetes). Internet egress leaves them
	// out: a node's address is often not in a private range.
	APIServerAddresses []string
}

const (
	// AdapterPath is where the operator image holds the stdio adapter's own
	// binary (`manager stdio-adapter` without the rest of the manager).
	AdapterPath = "/stdio-adapter"
	// adapterDir is the emptyDir the adapter's sidecar installs it into.
	adapterDir  = "/mcp-operator"
	adapterPath = adapterDir + "/stdio-adapter"

	serverContainer  = "server"
	adapterContainer = "install-adapter"
	adapterVolume    = "mcp-operator-bin"
	tmpVolume        = "tmp"
	mcpPortName      = "mcp"
	defaultNonRootID = int64(65532)

	labelName      = "app.kubernetes.io/name"
	labelComponent = "app.kubernetes.io/component"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelInstance  = "app.kubernetes.io/instance"
	operatorName   = "mcp-operator"
)

// defaultResources are the default requests and limits for a key the user
// left unset.
var defaultResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
}

// serverLabels select everything the controller creates for one server.
func serverLabels(s *mcpv1alpha1.MCPServer) map[string]string {
	return map[string]string{
		mcpv1alpha1.ServerLabel: s.Name,
		labelManagedBy:          operatorName,
		labelInstance:           s.Name,
	}
}

// podName is deterministic: one name per incarnation, numbered by the crashes
// seen so far, so a restart is a new pod that never races the old one's
// deletion.
func podName(s *mcpv1alpha1.MCPServer) string {
	return fmt.Sprintf("%s-%d", s.Name, s.Status.Restarts.Total)
}

// buildPod returns the pod that runs a workload server.
func buildPod(s *mcpv1alpha1.MCPServer, opts WorkloadOptions) *corev1.Pod {
	w := s.Spec.Workload
	port := w.Port
	if port == 0 {
		port = 8080
	}
	path := w.Path
	if path == "" {
		path = "/mcp"
	}

	readOnlyRoot := true
	runAsUser, runAsGroup := ptr.To(defaultNonRootID), ptr.To(defaultNonRootID)
	var fsGroup *int64
	if sc := w.SecurityContext; sc != nil {
		if sc.ReadOnlyRootFilesystem != nil {
			readOnlyRoot = *sc.ReadOnlyRootFilesystem
		}
		if sc.RunAsUser != nil {
			runAsUser = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			runAsGroup = sc.RunAsGroup
		}
		fsGroup = sc.FSGroup
	}

	server := corev1.Container{
		Name:            serverContainer,
		Image:           w.Image,
		Command:         w.Command,
		Args:            w.Args,
		Env:             w.Env,
		EnvFrom:         w.EnvFrom,
		Ports:           []corev1.ContainerPort{{Name: mcpPortName, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
		Resources:       mergeResources(w.Resources),
		SecurityContext: hardenedContainer(readOnlyRoot),
		// Servers that write temporary files get a writable /tmp on an
		// otherwise read-only root filesystem.
		VolumeMounts: append([]corev1.VolumeMount{{Name: tmpVolume, MountPath: "/tmp"}}, w.VolumeMounts...),
		// Every second. The controller does not wait for it to serve a new
		// pod: it probes the pod itself once the server runs (the kubelet's
		// first probe usually comes before the server listens, the next a
		// second later). After that the kubelet's readiness counts: a pod
		// that was Ready and no longer is, is not served.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
			PeriodSeconds: 1, FailureThreshold: 3,
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	volumes := append([]corev1.Volume{{Name: tmpVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Mi"))}}}}, w.Volumes...)

	var initContainers []corev1.Container
	if s.Spec.Transport == mcpv1alpha1.TransportStdio {
		// The adapter serves the stdio server over Streamable HTTP and exits
		// with the server's exit code, so the pod fails when the server does.
		server.Command = append([]string{adapterPath,
			"--listen", ":" + strconv.Itoa(int(port)), "--path", path, "--"}, w.Command...)
		server.ReadinessProbe.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port)}}
		server.VolumeMounts = append(server.VolumeMounts, corev1.VolumeMount{Name: adapterVolume, MountPath: adapterDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: adapterVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		// The adapter comes from the operator's image by a sidecar (an init
		// container that keeps running, idle) whose postStart hook copies
		// it: the kubelet starts the server once the hook is done and sees
		// the sidecar running, which it looks for right away. A plain init
		// container that copies and exits would hold the server back until
		// the kubelet noticed the exit, at its next relist (up to a second).
		initContainers = []corev1.Container{{
			Name:          adapterContainer,
			Image:         opts.OperatorImage,
			Command:       []string{AdapterPath, "--hold"},
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
				Exec: &corev1.ExecAction{Command: []string{AdapterPath, "--install", adapterPath}},
			}},
			Resources:                adapterResources,
			SecurityContext:          hardenedContainer(true),
			VolumeMounts:             []corev1.VolumeMount{{Name: adapterVolume, MountPath: adapterDir}},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}}
	}

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      podName(s),
			Namespace: s.Namespace,
			Labels:    serverLabels(s),
		},
		Spec: corev1.PodSpec{
			// The controller owns restarts: backoff, crash counting, giving up.
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			ServiceAccountName:           w.ServiceAccountName,
			EnableServiceLinks:           ptr.To(false),
			NodeSelector:                 w.NodeSelector,
			Tolerations:                  w.Tolerations,
			InitContainers:               initContainers,
			Containers:                   []corev1.Container{server},
			Volumes:                      volumes,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      runAsUser,
				RunAsGroup:     runAsGroup,
				FSGroup:        fsGroup,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			TerminationGracePeriodSeconds: ptr.To(int64(10)),
		},
	}
}

// adapterResources are the adapter container's. It is idle but for its
// start and the copy its postStart hook makes; as a sidecar it runs for the
// pod's life, so these add to the pod's requests and limits, and to a
// ResourceQuota's count, as long as the pod lives (docs/stdio-adapter.md).
// Its CPU limit is the servers' default: runc starts the container and
// execs the hook within its CPU quota, and at 100m that start and the hook
// (a few tens of milliseconds of CPU) waited on the quota for about a
// quarter of a second, which every start and wake of the server waits for.
// The limit is 50 times the request: a LimitRange whose CPU
// maxLimitRequestRatio is lower refuses stdio pods.
var adapterResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
}

// hardenedContainer is the security context of every container the
// controller creates; only the root filesystem may be made writable.
func hardenedContainer(readOnlyRoot bool) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(readOnlyRoot),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// mergeResources fills the keys the user left unset with the defaults
// (defaultResources). Where a default would contradict the user's own value
// (a default limit below the user's request, a default request above the
// user's limit), the default gives way.
func mergeResources(user *corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := defaultResources.DeepCopy()
	if user == nil {
		return *out
	}
	for name, q := range user.Requests {
		out.Requests[name] = q
	}
	for name, q := range user.Limits {
		out.Limits[name] = q
	}
	for name, req := range out.Requests {
		lim, ok := out.Limits[name]
		if !ok || lim.Cmp(req) >= 0 {
			continue
		}
		_, userRequest := user.Requests[name]
		_, userLimit := user.Limits[name]
		switch {
		case userRequest && !userLimit:
			out.Limits[name] = req
		case userLimit && !userRequest:
			out.Requests[name] = lim
		}
	}
	out.Claims = user.Claims
	return *out
}

// buildService returns the Service of a workload server, for humans and other
// tools; the bridge dials the pod IP in status.endpoint.
func buildService(s *mcpv1alpha1.MCPServer) *corev1.Service {
	port := s.Spec.Workload.Port
	if port == 0 {
		port = 8080
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: serverLabels(s)},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{mcpv1alpha1.ServerLabel: s.Name},
			Ports: []corev1.ServicePort{{
				Name: mcpPortName, Port: port, TargetPort: intstr.FromString(mcpPortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// privateRanges are left out of Internet egress, so "Internet" never means
// the cluster's own networks.
var (
	privateRanges   = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10"}
	privateRangesV6 = []string{"fc00::/7", "fe80::/10"}
)

// internetExcept is what Internet egress leaves out, per IP family: the
// private ranges, and the API server's addresses outside them (one host
// each), so a server reaches neither whatever the cluster's addressing.
func internetExcept(apiServer []string) (v4, v6 []string) {
	v4, v6 = slices.Clone(privateRanges), slices.Clone(privateRangesV6)
	for _, a := range apiServer {
		ip, err := netip.ParseAddr(a)
		if err != nil || covered(ip, v4) || covered(ip, v6) {
			continue
		}
		if ip.Is4() {
			v4 = append(v4, netip.PrefixFrom(ip, 32).String())
		} else {
			v6 = append(v6, netip.PrefixFrom(ip, 128).String())
		}
	}
	return v4, v6
}

// covered tells whether one of cidrs holds ip.
func covered(ip netip.Addr, cidrs []string) bool {
	return slices.ContainsFunc(cidrs, func(c string) bool {
		p, err := netip.ParsePrefix(c)
		return err == nil && p.Contains(ip)
	})
}

// buildNetworkPolicy lets only the bridge and the controller reach the server
// on its MCP port, and lets the server reach what spec.workload.network.egress
// allows. Server pods never reach each other.
func buildNetworkPolicy(s *mcpv1alpha1.MCPServer, opts WorkloadOptions) *networkingv1.NetworkPolicy {
	port := s.Spec.Workload.Port
	if port == 0 {
		port = 8080
	}
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	operatorPods := &metav1.LabelSelector{
		MatchLabels: map[string]string{labelName: operatorName},
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: labelComponent, Operator: metav1.LabelSelectorOpIn, Values: []string{"bridge", "controller"},
		}},
	}
	dns := networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{
		{Protocol: &udp, Port: ptr.To(intstr.FromInt32(53))},
		{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(53))},
	}}
	// Every pod in the cluster that is neither an MCP server nor one of the
	// operator's own (the bridge would be a way around ToolPolicy to the
	// other servers, the controller a way to their catalogs).
	nonServerPods := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{},
		PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: mcpv1alpha1.ServerLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: labelName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{operatorName}},
		}},
	}

	egress := []networkingv1.NetworkPolicyEgressRule{}
	mode := s.Spec.Workload.Network.Egress
	if mode == "" {
		mode = mcpv1alpha1.EgressDNS
	}
	switch mode {
	case mcpv1alpha1.EgressDNS:
		egress = append(egress, dns)
	case mcpv1alpha1.EgressCluster:
		egress = append(egress, dns, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{nonServerPods}})
	case mcpv1alpha1.EgressInternet:
		v4, v6 := internetExcept(opts.APIServerAddresses)
		egress = append(egress, dns, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: v4}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: v6}},
		}})
	}
	for _, allow := range s.Spec.Workload.Network.EgressAllow {
		rule := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: allow.CIDR}}}}
		for _, p := range allow.Ports {
			protocol := p.Protocol
			if protocol == "" {
				protocol = corev1.ProtocolTCP
			}
			rule.Ports = append(rule.Ports, networkingv1.NetworkPolicyPort{Protocol: &protocol, Port: ptr.To(intstr.FromInt32(p.Port))})
		}
		egress = append(egress, rule)
	}

	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: serverLabels(s)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{mcpv1alpha1.ServerLabel: s.Name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					PodSelector:       operatorPods,
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": opts.OperatorNamespace}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(port))}},
			}},
			Egress: egress,
		},
	}
}
