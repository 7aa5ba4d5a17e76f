package chart_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mcp-operator/mcp-operator/internal/identity"
)

const keepAnnotation = "helm.sh/resource-policy"

// TestCRDsEqualGeneratedSources: the chart's CRDs are controller-gen's, spec
// for spec, and kept on uninstall by default.
func TestCRDsEqualGeneratedSources(t *testing.T) {
	rendered := helmTemplate(t)
	sources := sourceObjects(t, "config/crd/bases/*.yaml")
	if got, want := len(rendered.ofKind("CustomResourceDefinition")), len(sources); got != want {
		t.Fatalf("chart has %d CRDs, config/crd/bases %d", got, want)
	}
	for _, src := range sources {
		crd := rendered.find("CustomResourceDefinition", src.GetName())
		if crd == nil {
			t.Errorf("CRD %s missing from the chart", src.GetName())
			continue
		}
		if !reflect.DeepEqual(crd.Object["spec"], src.Object["spec"]) {
			t.Errorf("CRD %s: the chart's spec differs from config/crd/bases: run 'make chart'", src.GetName())
		}
		if crd.GetAnnotations()[keepAnnotation] != "keep" {
			t.Errorf("CRD %s: annotations %v, want %s: keep", src.GetName(), crd.GetAnnotations(), keepAnnotation)
		}
		if crd.GetLabels()["app.kubernetes.io/name"] != "mcp-operator" {
			t.Errorf("CRD %s: labels %v", src.GetName(), crd.GetLabels())
		}
	}
}

// TestCRDValues: crds.enabled and crds.keep.
func TestCRDValues(t *testing.T) {
	if crds := helmTemplate(t, "--set", "crds.enabled=false").ofKind("CustomResourceDefinition"); len(crds) != 0 {
		t.Errorf("crds.enabled=false rendered %d CRDs", len(crds))
	}
	crds := helmTemplate(t, "--set", "crds.keep=false").ofKind("CustomResourceDefinition")
	if len(crds) == 0 {
		t.Fatal("crds.keep=false rendered no CRDs")
	}
	for _, crd := range crds {
		if _, ok := crd.GetAnnotations()[keepAnnotation]; ok {
			t.Errorf("crds.keep=false: CRD %s still has %s", crd.GetName(), keepAnnotation)
		}
	}
}

// TestRolesEqualConfigRBAC: every Role and ClusterRole of config/rbac is in
// the chart, under the release's name, with the same rules.
func TestRolesEqualConfigRBAC(t *testing.T) {
	for _, release := range []string{"mcp-operator", "prod"} {
		t.Run(release, func(t *testing.T) {
			rendered := helmTemplate(t, append([]string{release}, consoleOn...)...)
			prefix := release
			if release == "prod" {
				prefix = "prod-mcp-operator"
			}
			n := 0
			for _, src := range sourceObjects(t, "config/rbac/*.yaml") {
				if src.GetKind() != "Role" && src.GetKind() != "ClusterRole" {
					continue
				}
				n++
				name := prefix + strings.TrimPrefix(src.GetName(), "mcp-operator")
				got := rendered.find(src.GetKind(), name)
				if got == nil {
					t.Errorf("%s %s (from %s) missing from the chart", src.GetKind(), name, src.GetName())
					continue
				}
				if want := typed[rbacv1.ClusterRole](t, src).Rules; !reflect.DeepEqual(typed[rbacv1.ClusterRole](t, got).Rules, want) {
					t.Errorf("%s %s: rules differ from config/rbac: run 'make chart'", src.GetKind(), name)
				}
				if src.GetKind() == "Role" && got.GetNamespace() != releaseNS {
					t.Errorf("Role %s in namespace %q, want %s", name, got.GetNamespace(), releaseNS)
				}
			}
			if n == 0 {
				t.Fatal("config/rbac holds no roles")
			}
		})
	}
}

// TestAdmissionPolicyEqualsConfig: the admission policies (ToolApprovals,
// ToolPolicy lints) and their bindings are config/admission's, under the
// release's name, and
// admissionPolicy.enabled=false leaves them out.
func TestAdmissionPolicyEqualsConfig(t *testing.T) {
	rendered := helmTemplate(t, "prod")
	var sources objects
	for _, src := range sourceObjects(t, "config/admission/*.yaml") {
		if isAdmission(src) {
			sources = append(sources, src)
		}
	}
	if len(sources) != 4 {
		t.Fatalf("config/admission holds %d admission objects, want two policies and their bindings", len(sources))
	}
	for _, src := range sources {
		name := "prod-mcp-operator" + strings.TrimPrefix(src.GetName(), "mcp-operator")
		got := rendered.find(src.GetKind(), name)
		if got == nil {
			t.Errorf("%s %s missing from the chart", src.GetKind(), name)
			continue
		}
		want := src.DeepCopy().Object["spec"].(map[string]any)
		if p, ok := want["policyName"].(string); ok {
			want["policyName"] = "prod-mcp-operator" + strings.TrimPrefix(p, "mcp-operator")
		}
		if !reflect.DeepEqual(got.Object["spec"], want) {
			t.Errorf("%s %s: spec differs from config/admission: run 'make chart'", src.GetKind(), name)
		}
		if got.GetLabels()["app.kubernetes.io/name"] != "mcp-operator" {
			t.Errorf("%s %s: labels %v", src.GetKind(), name, got.GetLabels())
		}
	}
	off := helmTemplate(t, "--set", "admissionPolicy.enabled=false")
	if n := len(off.ofKind("ValidatingAdmissionPolicy")) + len(off.ofKind("ValidatingAdmissionPolicyBinding")); n != 0 {
		t.Errorf("admissionPolicy.enabled=false rendered %d admission objects", n)
	}
}

func isAdmission(u *unstructured.Unstructured) bool {
	return strings.HasPrefix(u.GetKind(), "ValidatingAdmissionPolicy")
}

// TestBindingsResolve: every binding names a role and ServiceAccounts that
// the chart renders, so no permission silently goes missing.
func TestBindingsResolve(t *testing.T) {
	for name, args := range map[string][]string{
		"defaults":          nil,
		"bridge namespaces": {"--set", "bridge.namespaces={team-a,team-b}"},
		"no bridge":         {"--set", "bridge.enabled=false"},
		"console":           consoleOn,
	} {
		t.Run(name, func(t *testing.T) {
			rendered := helmTemplate(t, args...)
			bindings := append(rendered.ofKind("RoleBinding"), rendered.ofKind("ClusterRoleBinding")...)
			if len(bindings) == 0 {
				t.Fatal("no bindings rendered")
			}
			for _, b := range bindings {
				rb := typed[rbacv1.RoleBinding](t, b)
				if rendered.find(rb.RoleRef.Kind, rb.RoleRef.Name) == nil {
					t.Errorf("%s %s binds %s %s, which the chart does not render", b.GetKind(), b.GetName(), rb.RoleRef.Kind, rb.RoleRef.Name)
				}
				for _, s := range rb.Subjects {
					sa := rendered.find("ServiceAccount", s.Name)
					if s.Kind != "ServiceAccount" || sa == nil || sa.GetNamespace() != s.Namespace {
						t.Errorf("%s %s: subject %+v is not a rendered ServiceAccount", b.GetKind(), b.GetName(), s)
					}
				}
			}
		})
	}
}

// TestDeployments: the controller and the bridge run the one image with
// their subcommand, carry the labels NetworkPolicies select on, and are hardened.
func TestDeployments(t *testing.T) {
	rendered := helmTemplate(t, consoleOn...)
	for _, tc := range []struct {
		name, component, subcommand string
		args                        []string
	}{
		{"mcp-operator-controller", "controller", "controller", []string{"--leader-elect=true"}},
		{"mcp-operator-bridge", "bridge", "bridge", []string{"--namespaces=" + releaseNS}},
		{"mcp-operator-console", "console", "console", []string{"--public-url=https://console.example.com", "--oidc-issuer-url=https://idp.example.com"}},
	} {
		t.Run(tc.component, func(t *testing.T) {
			u := rendered.find("Deployment", tc.name)
			if u == nil {
				t.Fatalf("Deployment %s not rendered", tc.name)
			}
			d := typed[appsv1.Deployment](t, u)
			if d.Namespace != releaseNS {
				t.Errorf("namespace %q", d.Namespace)
			}
			podLabels := d.Spec.Template.Labels
			if podLabels["app.kubernetes.io/name"] != "mcp-operator" || podLabels["app.kubernetes.io/component"] != tc.component {
				t.Errorf("pod labels %v lack name=mcp-operator, component=%s", podLabels, tc.component)
			}
			if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(podLabels)) {
				t.Errorf("selector %v does not match the pod labels %v", d.Spec.Selector.MatchLabels, podLabels)
			}
			if rendered.find("ServiceAccount", d.Spec.Template.Spec.ServiceAccountName) == nil {
				t.Errorf("ServiceAccount %q not rendered", d.Spec.Template.Spec.ServiceAccountName)
			}
			checkHardened(t, d)
			c := d.Spec.Template.Spec.Containers[0]
			if c.Image != "localhost/mcp-operator/manager:0.1.0" {
				t.Errorf("image %q, want the chart's appVersion tag", c.Image)
			}
			if len(c.Args) == 0 || c.Args[0] != tc.subcommand {
				t.Errorf("args %q do not start with the subcommand %s", c.Args, tc.subcommand)
			}
			for _, a := range tc.args {
				if !slices.Contains(c.Args, a) {
					t.Errorf("args %q lack %s", c.Args, a)
				}
			}
		})
	}
}

func checkHardened(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec.SecurityContext
	if pod == nil || pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot {
		t.Errorf("%s: pod runAsNonRoot is not true", d.Name)
	}
	if pod == nil || pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod seccomp profile is not RuntimeDefault", d.Name)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s/%s: no securityContext", d.Name, c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s/%s: allowPrivilegeEscalation is not false", d.Name, c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s/%s: readOnlyRootFilesystem is not true", d.Name, c.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
			t.Errorf("%s/%s: capabilities do not drop ALL", d.Name, c.Name)
		}
		if c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s/%s: no memory limit", d.Name, c.Name)
		}
	}
}

// TestServicesSelectTheirPods: the bridge Service reaches bridge pods only,
// the metrics Service controller pods only, on ports the containers name.
func TestServicesSelectTheirPods(t *testing.T) {
	rendered := helmTemplate(t)
	pods := map[string]corev1.PodTemplateSpec{}
	for _, u := range rendered.ofKind("Deployment") {
		pods[u.GetName()] = typed[appsv1.Deployment](t, u).Spec.Template
	}
	for svcName, target := range map[string]string{
		"mcp-operator-bridge":             "mcp-operator-bridge",
		"mcp-operator-bridge-metrics":     "mcp-operator-bridge",
		"mcp-operator-controller-metrics": "mcp-operator-controller",
	} {
		u := rendered.find("Service", svcName)
		if u == nil {
			t.Errorf("Service %s not rendered", svcName)
			continue
		}
		svc := typed[corev1.Service](t, u)
		if svcName == "mcp-operator-bridge" && svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
			t.Errorf("the bridge's Service has session affinity %q, want ClientIP (a session's approval questions and subscriptions live on one replica)", svc.Spec.SessionAffinity)
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for name, pod := range pods {
			if got := sel.Matches(labels.Set(pod.Labels)); got != (name == target) {
				t.Errorf("Service %s selects pods of %s: %v", svcName, name, got)
			}
		}
		for _, p := range svc.Spec.Ports {
			found := false
			for _, cp := range pods[target].Spec.Containers[0].Ports {
				found = found || cp.Name == p.TargetPort.StrVal
			}
			if !found {
				t.Errorf("Service %s: targetPort %q is no port of %s", svcName, p.TargetPort.String(), target)
			}
		}
	}
}

// TestValues: settings that switch parts and names.
func TestValues(t *testing.T) {
	t.Run("bridge disabled", func(t *testing.T) {
		for _, u := range helmTemplate(t, "--set", "bridge.enabled=false") {
			if u.GetLabels()["app.kubernetes.io/component"] == "bridge" || strings.Contains(u.GetName(), "bridge") {
				t.Errorf("bridge.enabled=false still renders %s %s", u.GetKind(), u.GetName())
			}
		}
	})
	t.Run("rbac off", func(t *testing.T) {
		rendered := helmTemplate(t, "--set", "rbac.create=false")
		for _, kind := range []string{"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"} {
			if n := len(rendered.ofKind(kind)); n != 0 {
				t.Errorf("rbac.create=false renders %d %s", n, kind)
			}
		}
	})
	t.Run("image", func(t *testing.T) {
		rendered := helmTemplate(t, "--set", "image.repository=registry.example/mcp/manager", "--set", "image.tag=dev", "--set", "image.pullPolicy=Never")
		for _, u := range rendered.ofKind("Deployment") {
			c := typed[appsv1.Deployment](t, u).Spec.Template.Spec.Containers[0]
			if c.Image != "registry.example/mcp/manager:dev" || c.ImagePullPolicy != corev1.PullNever {
				t.Errorf("%s: image %q pull %q", u.GetName(), c.Image, c.ImagePullPolicy)
			}
		}
		digest := "sha256:" + strings.Repeat("ab", 32)
		c := typed[appsv1.Deployment](t, helmTemplate(t, "--set", "image.digest="+digest).find("Deployment", "mcp-operator-controller")).Spec.Template.Spec.Containers[0]
		if c.Image != "localhost/mcp-operator/manager@"+digest {
			t.Errorf("digest: image %q", c.Image)
		}
		if env := envValue(c, "MANAGER_IMAGE"); env != c.Image {
			t.Errorf("MANAGER_IMAGE %q, want the pod's image %q", env, c.Image)
		}
	})
	t.Run("bridge namespaces", func(t *testing.T) {
		rendered := helmTemplate(t, "--set", "bridge.namespaces={team-a,team-b}")
		var bound []string
		for _, u := range rendered.ofKind("RoleBinding") {
			if u.GetName() == "mcp-operator-bridge" {
				bound = append(bound, u.GetNamespace())
			}
		}
		if !slices.Equal(bound, []string{"team-a", "team-b"}) {
			t.Errorf("bridge RoleBindings in %v, want [team-a team-b]", bound)
		}
		c := typed[appsv1.Deployment](t, rendered.find("Deployment", "mcp-operator-bridge")).Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--namespaces=team-a,team-b") {
			t.Errorf("bridge args %q", c.Args)
		}
	})
	t.Run("release name", func(t *testing.T) {
		rendered := helmTemplate(t, "prod")
		for _, u := range rendered {
			if u.GetKind() == "CustomResourceDefinition" {
				continue
			}
			if !strings.HasPrefix(u.GetName(), "prod-mcp-operator-") {
				t.Errorf("%s %s is not prefixed by the release's full name", u.GetKind(), u.GetName())
			}
			if u.GetLabels()["app.kubernetes.io/name"] != "mcp-operator" || u.GetLabels()["app.kubernetes.io/instance"] != "prod" {
				t.Errorf("%s %s labels %v", u.GetKind(), u.GetName(), u.GetLabels())
			}
		}
	})
	t.Run("metrics apart from the agents' port", func(t *testing.T) {
		rendered := helmTemplate(t, "--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=prom")
		c := typed[appsv1.Deployment](t, rendered.find("Deployment", "mcp-operator-bridge")).Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--metrics-bind-address=:8091") || c.LivenessProbe.HTTPGet.Port.StrVal != "metrics" || c.ReadinessProbe.HTTPGet.Port.StrVal != "metrics" {
			t.Errorf("bridge args %q, probes on %q and %q: want metrics and health on the metrics port", c.Args, c.LivenessProbe.HTTPGet.Port.String(), c.ReadinessProbe.HTTPGet.Port.String())
		}
		agents := typed[corev1.Service](t, rendered.find("Service", "mcp-operator-bridge"))
		if len(agents.Spec.Ports) != 1 || agents.Spec.Ports[0].TargetPort.StrVal != "http" {
			t.Errorf("the agents' Service exposes %+v, want the http port only", agents.Spec.Ports)
		}
		sm := rendered.find("ServiceMonitor", "mcp-operator")
		if sm == nil {
			t.Fatal("serviceMonitor.enabled=true renders no ServiceMonitor")
		}
		if sm.GetLabels()["release"] != "prom" {
			t.Errorf("ServiceMonitor labels %v lack release=prom", sm.GetLabels())
		}
		match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" {
			t.Errorf("ServiceMonitor endpoints %v, want the metrics port", endpoints)
		}
		var scraped []string
		for _, svc := range rendered.ofKind("Service") {
			if labels.SelectorFromSet(match).Matches(labels.Set(svc.GetLabels())) {
				scraped = append(scraped, svc.GetName())
			}
		}
		slices.Sort(scraped)
		if !slices.Equal(scraped, []string{"mcp-operator-bridge-metrics", "mcp-operator-controller-metrics"}) {
			t.Errorf("the ServiceMonitor selects %v, want the two metrics Services only", scraped)
		}
		if helmTemplate(t).find("ServiceMonitor", "mcp-operator") != nil {
			t.Error("a ServiceMonitor is rendered by default (its CRD may not exist)")
		}
	})
	t.Run("tracing", func(t *testing.T) {
		// Off by default: no OTEL_* variable at all.
		for _, u := range helmTemplate(t).ofKind("Deployment") {
			for _, e := range typed[appsv1.Deployment](t, u).Spec.Template.Spec.Containers[0].Env {
				if strings.HasPrefix(e.Name, "OTEL_") {
					t.Errorf("%s has %s with tracing off", u.GetName(), e.Name)
				}
			}
		}
		rendered := helmTemplate(t, "--set", "tracing.endpoint=http://collector.observability:4317", "--set", "tracing.protocol=grpc",
			"--set", "tracing.sampler=parentbased_traceidratio", "--set-string", "tracing.samplerArg=0.25")
		for name, service := range map[string]string{"mcp-operator-bridge": "mcp-operator-bridge", "mcp-operator-controller": "mcp-operator-controller"} {
			c := typed[appsv1.Deployment](t, rendered.find("Deployment", name)).Spec.Template.Spec.Containers[0]
			want := map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.observability:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
				"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_SERVICE_NAME": service,
			}
			for k, v := range want {
				if got := envValue(c, k); got != v {
					t.Errorf("%s: %s=%q, want %q", name, k, got, v)
				}
			}
		}
	})
	t.Run("pod annotations", func(t *testing.T) {
		d := typed[appsv1.Deployment](t, helmTemplate(t, "--set-string", "controller.podAnnotations.rev=7").find("Deployment", "mcp-operator-controller"))
		if d.Spec.Template.Annotations["rev"] != "7" {
			t.Errorf("pod annotations %v", d.Spec.Template.Annotations)
		}
	})
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestSchemaRejectsMistakes: values.schema.json turns typos and wrong types
// into errors naming the key, instead of a chart that silently ignores them.
func TestSchemaRejectsMistakes(t *testing.T) {
	for name, tc := range map[string]struct{ set, mention string }{
		"unknown top-level key": {"crd.enabled=false", "crd"},
		"unknown nested key":    {"bridge.enable=false", "enable"},
		"wrong type":            {"crds.enabled=yes", "crds"},
		"port out of range":     {"bridge.port=0", "port"},
		"pull policy":           {"image.pullPolicy=Sometimes", "pullPolicy"},
		"bad namespace":         {"bridge.namespaces={Team_A}", "namespaces"},
		"bad digest":            {"image.digest=latest", "digest"},
		"tracing protocol":      {"tracing.protocol=http/json", "protocol"},
		"tracing sampler":       {"tracing.sampler=sometimes", "sampler"},
		"tracing endpoint":      {"tracing.endpoint=collector:4317", "endpoint"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := helmTemplateErr(t, "--set", tc.set)
			if err == nil {
				t.Fatalf("--set %s rendered without error:\n%.300s", tc.set, out)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error does not mention %q: %v", tc.mention, err)
			}
		})
	}
}

// TestKustomizeMatchesChart: config/default (kustomize) installs the same
// objects as the chart's defaults, with the same RBAC rules, and is hardened
// and labelled the same way.
func TestKustomizeMatchesChart(t *testing.T) {
	out, err := run(t, tool(t, "kustomize"), "build", "config/default")
	if err != nil {
		t.Fatal(err)
	}
	kust := parse(t, out)
	chart := helmTemplate(t)
	key := func(u *unstructured.Unstructured) string {
		ns := u.GetNamespace()
		if isAdmission(u) {
			// kustomize does not know these kinds are cluster-scoped and
			// sets config/default's namespace on them; the API server
			// drops it on create.
			ns = ""
		}
		return u.GetKind() + "/" + ns + "/" + u.GetName()
	}
	var kustKeys, chartKeys []string
	for _, u := range kust {
		if u.GetKind() != "Namespace" { // helm install --create-namespace makes it
			kustKeys = append(kustKeys, key(u))
		}
	}
	for _, u := range chart {
		// The chart makes the bridge's session key with a random value once;
		// kustomize can't, so config/ leaves that Secret to the user.
		if u.GetKind() == "Secret" && strings.HasSuffix(u.GetName(), "-bridge-session") {
			continue
		}
		chartKeys = append(chartKeys, key(u))
	}
	slices.Sort(kustKeys)
	slices.Sort(chartKeys)
	if !slices.Equal(kustKeys, chartKeys) {
		t.Errorf("config/default and the chart install different objects:\nkustomize %v\nchart     %v", kustKeys, chartKeys)
	}
	for _, u := range kust {
		switch u.GetKind() {
		case "Role", "ClusterRole":
			c := chart.find(u.GetKind(), u.GetName())
			if c != nil && !reflect.DeepEqual(typed[rbacv1.ClusterRole](t, u).Rules, typed[rbacv1.ClusterRole](t, c).Rules) {
				t.Errorf("%s %s: rules differ between config/ and the chart", u.GetKind(), u.GetName())
			}
		case "Deployment":
			d := typed[appsv1.Deployment](t, u)
			checkHardened(t, d)
			c := typed[appsv1.Deployment](t, chart.find("Deployment", u.GetName()))
			if d.Spec.Template.Labels["app.kubernetes.io/component"] != c.Spec.Template.Labels["app.kubernetes.io/component"] ||
				d.Spec.Template.Labels["app.kubernetes.io/name"] != "mcp-operator" {
				t.Errorf("Deployment %s: pod labels %v", u.GetName(), d.Spec.Template.Labels)
			}
		case "CustomResourceDefinition":
			if src := sourceObjects(t, "config/crd/bases/*.yaml").find(u.GetKind(), u.GetName()); src == nil || !reflect.DeepEqual(src.Object["spec"], u.Object["spec"]) {
				t.Errorf("CRD %s differs from config/crd/bases", u.GetName())
			}
		}
		clusterScoped := u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition" ||
			strings.HasPrefix(u.GetKind(), "Cluster") || isAdmission(u)
		if !clusterScoped && u.GetNamespace() != releaseNS {
			t.Errorf("%s %s in namespace %q, want %s", u.GetKind(), u.GetName(), u.GetNamespace(), releaseNS)
		}
	}
}

// TestBridgeSessionKeyAndArtifacts: the replicas share a session key the
// chart makes (or the user names), and capped results have a volume.
func TestBridgeSessionKeyAndArtifacts(t *testing.T) {
	volumesOf := func(o objects) map[string]corev1.VolumeSource {
		d := typed[appsv1.Deployment](t, o.find("Deployment", "mcp-operator-bridge"))
		out := map[string]corev1.VolumeSource{}
		for _, v := range d.Spec.Template.Spec.Volumes {
			out[v.Name] = v.VolumeSource
		}
		args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
		for _, flag := range []string{"--session-key-file=/etc/mcp-bridge/session/key", "--artifact-dir=/var/lib/mcp-bridge/artifacts",
			"--artifact-max-size=900Mi", "--artifact-retention=24h", "--max-body-bytes-in-flight=67108864"} {
			if !strings.Contains(args, flag) {
				t.Errorf("bridge args %q lack %s", args, flag)
			}
		}
		return out
	}

	def := helmTemplate(t)
	secret := typed[corev1.Secret](t, def.find("Secret", "mcp-operator-bridge-session"))
	if len(secret.Data["key"]) < 32 {
		t.Errorf("session key of %d bytes, want at least 32", len(secret.Data["key"]))
	}
	vols := volumesOf(def)
	if vols["session-key"].Secret == nil || vols["session-key"].Secret.SecretName != "mcp-operator-bridge-session" || vols["artifacts"].EmptyDir == nil {
		t.Errorf("default volumes %+v", vols)
	}

	own := helmTemplate(t, "--set", "bridge.sessionKey.existingSecret=my-key", "--set", "bridge.artifacts.existingClaim=shared")
	if own.find("Secret", "mcp-operator-bridge-session") != nil {
		t.Error("the chart made a session key although one was named")
	}
	vols = volumesOf(own)
	if vols["session-key"].Secret.SecretName != "my-key" || vols["artifacts"].PersistentVolumeClaim == nil || vols["artifacts"].PersistentVolumeClaim.ClaimName != "shared" {
		t.Errorf("volumes with existing secret and claim %+v", vols)
	}
}

// TestBridgeApprovalWebhook: bridge.approvalWebhook gives the bridge the
// webhook's URL and the file its flag names, mounted from the named key of
// the Secret; without a URL there is neither; a URL without a Secret is
// refused with a message that says what is missing.
func TestBridgeApprovalWebhook(t *testing.T) {
	bridge := func(o objects) *appsv1.Deployment {
		return typed[appsv1.Deployment](t, o.find("Deployment", "mcp-operator-bridge"))
	}
	for _, a := range bridge(helmTemplate(t)).Spec.Template.Spec.Containers[0].Args {
		if strings.Contains(a, "approval-webhook") {
			t.Errorf("a webhook flag without bridge.approvalWebhook.url: %s", a)
		}
	}

	d := bridge(helmTemplate(t, "--set", "bridge.approvalWebhook.url=https://hooks.example/mcp",
		"--set", "bridge.approvalWebhook.secretRef.name=mcp-hook", "--set", "bridge.approvalWebhook.secretRef.key=hmac"))
	c := d.Spec.Template.Spec.Containers[0]
	secretFile := ""
	var url string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--approval-webhook-url="); ok {
			url = v
		}
		if v, ok := strings.CutPrefix(a, "--approval-webhook-secret-file="); ok {
			secretFile = v
		}
	}
	if url != "https://hooks.example/mcp" || secretFile == "" {
		t.Fatalf("bridge args %q: want the webhook's URL and secret file", c.Args)
	}
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if strings.HasPrefix(secretFile, m.MountPath+"/") {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || !mount.ReadOnly {
		t.Fatalf("no read-only mount holds %s: %+v", secretFile, c.VolumeMounts)
	}
	var source *corev1.SecretVolumeSource
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name {
			source = v.Secret
		}
	}
	want := strings.TrimPrefix(secretFile, mount.MountPath+"/")
	if source == nil || source.SecretName != "mcp-hook" || len(source.Items) != 1 || source.Items[0].Key != "hmac" || source.Items[0].Path != want {
		t.Errorf("volume %s = %+v, want key hmac of Secret mcp-hook at %s", mount.Name, source, want)
	}

	_, err := helmTemplateErr(t, "--set", "bridge.approvalWebhook.url=https://hooks.example/mcp")
	if err == nil || !strings.Contains(err.Error(), "bridge.approvalWebhook.url needs bridge.approvalWebhook.secretRef.name") {
		t.Errorf("a webhook without its Secret: %v", err)
	}
	_, err = helmTemplateErr(t, "--set", "bridge.approvalWebhook.url=hooks.example/mcp", "--set", "bridge.approvalWebhook.secretRef.name=mcp-hook")
	if err == nil || !strings.Contains(err.Error(), "url") {
		t.Errorf("a webhook URL that is no http(s) URL: %v", err)
	}
}

// TestBridgeAuthentication: bridge.auth becomes a ConfigMap the bridge's
// own loader accepts, mounted where --authentication-config points;
// bridge.oidcIssuerURL and bridge.requiredScopes become their flags; OAuth
// without bridge.publicURL, or named both ways, is refused with what to fix.
func TestBridgeAuthentication(t *testing.T) {
	args := func(d *appsv1.Deployment) map[string]string {
		out := map[string]string{}
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if k, v, ok := strings.Cut(a, "="); ok {
				out[k] = v
			}
		}
		return out
	}
	bridge := func(o objects) *appsv1.Deployment {
		return typed[appsv1.Deployment](t, o.find("Deployment", "mcp-operator-bridge"))
	}
	plain := args(bridge(helmTemplate(t)))
	for _, flag := range []string{"--public-url", "--authentication-config", "--oidc-issuer-url", "--required-scopes", "--token-exchange-endpoints"} {
		if _, ok := plain[flag]; ok {
			t.Errorf("%s without OAuth values", flag)
		}
	}

	o := helmTemplate(t, "--set", "bridge.publicURL=https://mcp.example.com",
		"--set", "bridge.auth.jwt[0].issuer.url=https://idp.example.com",
		"--set", "bridge.auth.jwt[0].claimMappings.username.claim=email",
		"--set", "bridge.auth.jwt[0].claimMappings.username.prefix=corp:",
		"--set", "bridge.requiredScopes={mcp:tools,mcp:read}",
		"--set", "bridge.tokenExchangeEndpoints={https://sts.example.com/token}")
	d := bridge(o)
	a := args(d)
	if a["--public-url"] != "https://mcp.example.com" || a["--required-scopes"] != "mcp:tools,mcp:read" || a["--authentication-config"] == "" ||
		a["--token-exchange-endpoints"] != "https://sts.example.com/token" {
		t.Fatalf("bridge args %v", a)
	}
	cm := typed[corev1.ConfigMap](t, o.find("ConfigMap", "mcp-operator-bridge-authentication"))
	if cm == nil {
		t.Fatal("no ConfigMap mcp-operator-bridge-authentication")
	}
	cfg, err := identity.ParseAuthenticationConfig([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatalf("the bridge would refuse the chart's configuration: %v\n%s", err, cm.Data["config.yaml"])
	}
	if cfg.JWT[0].Issuer.URL != "https://idp.example.com" || cfg.JWT[0].ClaimMappings.Username.Prefix != "corp:" {
		t.Fatalf("configuration %+v", cfg)
	}
	c := d.Spec.Template.Spec.Containers[0]
	var mounted bool
	for _, m := range c.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name && a["--authentication-config"] == m.MountPath+"/config.yaml" {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("--authentication-config %s is not the ConfigMap's mount: %+v", a["--authentication-config"], c.VolumeMounts)
	}
	if d.Spec.Template.Annotations["checksum/authentication-config"] == "" {
		t.Error("no checksum annotation: a changed configuration would not restart the bridge")
	}

	withSecret := bridge(helmTemplate(t, "--set", "bridge.publicURL=https://mcp.example.com", "--set", "bridge.oidcIssuerURL=https://idp.example.com",
		"--set", "bridge.authSecrets={idp-introspection}"))
	if a := args(withSecret); a["--oidc-issuer-url"] != "https://idp.example.com" {
		t.Errorf("bridge args %v", a)
	}
	var secretMounted bool
	for _, m := range withSecret.Spec.Template.Spec.Containers[0].VolumeMounts {
		for _, v := range withSecret.Spec.Template.Spec.Volumes {
			if m.Name == v.Name && v.Secret != nil && v.Secret.SecretName == "idp-introspection" && m.MountPath == "/etc/mcp-bridge/auth-secrets/idp-introspection" && m.ReadOnly {
				secretMounted = true
			}
		}
	}
	if !secretMounted {
		t.Errorf("bridge.authSecrets: Secret idp-introspection not mounted read-only at /etc/mcp-bridge/auth-secrets/idp-introspection")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "bridge.oidcIssuerURL=https://idp.example.com"}, "needs bridge.publicURL"},
		{[]string{"--set", "bridge.publicURL=https://mcp.example.com", "--set", "bridge.oidcIssuerURL=https://idp.example.com", "--set", "bridge.auth.jwt[0].issuer.url=https://idp.example.com", "--set", "bridge.auth.jwt[0].claimMappings.username.claim=sub"}, "give one"},
		{[]string{"--set", "bridge.publicURL=https://mcp.example.com", "--set", "bridge.auth.jwt[0].issuer.url=https://idp.example.com"}, "claimMappings"},
		{[]string{"--set", "bridge.publicURL=https://mcp.example.com/mcp"}, "publicURL"},
	} {
		if _, err := helmTemplateErr(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}

// consoleOn renders the chart with the console.
var consoleOn = []string{"--set", "console.enabled=true", "--set", "console.publicURL=https://console.example.com", "--set", "console.oidc.issuerURL=https://idp.example.com"}

// TestConsole: off by default; on, it may impersonate users and groups and
// nothing else, reads the three kinds it watches, follows this release's
// bridge pods' logs, mounts the bridge's AuthenticationConfiguration and
// its client secret; without a public URL or an issuer it refuses.
func TestConsole(t *testing.T) {
	defaults := helmTemplate(t)
	if defaults.find("Deployment", "mcp-operator-console") != nil || defaults.find("ClusterRole", "mcp-operator-console-impersonate") != nil {
		t.Fatal("the console or its roles are rendered by default")
	}
	rendered := helmTemplate(t, consoleOn...)
	imp := typed[rbacv1.ClusterRole](t, rendered.find("ClusterRole", "mcp-operator-console-impersonate"))
	if len(imp.Rules) != 1 || !slices.Equal(imp.Rules[0].Verbs, []string{"impersonate"}) || !slices.Equal(imp.Rules[0].Resources, []string{"users", "groups"}) {
		t.Errorf("the impersonation role may do more than impersonate users and groups: %+v", imp.Rules)
	}
	read := typed[rbacv1.ClusterRole](t, rendered.find("ClusterRole", "mcp-operator-console"))
	for _, r := range read.Rules {
		for _, v := range r.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Errorf("the console's own role may %s %v", v, r.Resources)
			}
		}
	}
	svc := rendered.find("Service", "mcp-operator-console")
	if svc == nil {
		t.Fatal("no console Service")
	}
	d := typed[appsv1.Deployment](t, rendered.find("Deployment", "mcp-operator-console"))
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--audit-pod-selector=app.kubernetes.io/instance=mcp-operator,app.kubernetes.io/component=bridge") {
		t.Errorf("the console does not follow this release's bridge pods: %q", d.Spec.Template.Spec.Containers[0].Args)
	}
	withAuth := helmTemplate(t, "--set", "console.enabled=true", "--set", "console.publicURL=https://console.example.com",
		"--set", "console.oidc.clientSecretRef.name=console-client",
		"--set-json", `bridge.auth={"jwt":[{"issuer":{"url":"https://idp.example.com","audiences":["x"]},"claimMappings":{"username":{"claim":"email","prefix":"idp:"}}}]}`,
		"--set", "bridge.publicURL=https://bridge.example.com")
	cm := withAuth.find("ConfigMap", "mcp-operator-console-authentication")
	if cm == nil || !strings.Contains(cm.Object["data"].(map[string]any)["config.yaml"].(string), "prefix: 'idp:'") {
		t.Fatalf("the console does not get the bridge's AuthenticationConfiguration: %v", cm)
	}
	args := typed[appsv1.Deployment](t, withAuth.find("Deployment", "mcp-operator-console")).Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--authentication-config=/etc/mcp-console/auth/config.yaml", "--oidc-client-secret-file=/etc/mcp-console/client/secret"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	for name, args := range map[string][]string{
		"no public URL": {"--set", "console.enabled=true", "--set", "console.oidc.issuerURL=https://idp.example.com"},
		"no issuer":     {"--set", "console.enabled=true", "--set", "console.publicURL=https://console.example.com"},
	} {
		if out, err := helmTemplateErr(t, args...); err == nil {
			t.Errorf("%s: rendered: %.200s", name, out)
		}
	}
}
