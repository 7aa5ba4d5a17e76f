package chart_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// bridgeTLSFiles returns the bridge's --tls-cert-file and --tls-key-file and
// the Secret of the volume mounted where they are ("" when TLS is off).
func bridgeTLSFiles(t *testing.T, o objects) (cert, key, secret string) {
	t.Helper()
	d := typed[appsv1.Deployment](t, o.find("Deployment", "mcp-operator-bridge"))
	c := d.Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--tls-cert-file="); ok {
			cert = v
		}
		if v, ok := strings.CutPrefix(a, "--tls-key-file="); ok {
			key = v
		}
	}
	for _, m := range c.VolumeMounts {
		if cert == "" || !strings.HasPrefix(cert, m.MountPath+"/") || !m.ReadOnly {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				secret = v.Secret.SecretName
			}
		}
	}
	return cert, key, secret
}

func servicePort(t *testing.T, o objects) corev1.ServicePort {
	t.Helper()
	return typed[corev1.Service](t, o.find("Service", "mcp-operator-bridge")).Spec.Ports[0]
}

func TestBridgeTLS(t *testing.T) {
	plain := helmTemplate(t)
	if cert, key, _ := bridgeTLSFiles(t, plain); cert != "" || key != "" {
		t.Errorf("TLS flags without bridge.tls.enabled: %s %s", cert, key)
	}
	if p := servicePort(t, plain); p.Port != 80 {
		t.Errorf("plain Service port %d, want 80", p.Port)
	}
	for _, kind := range []string{"Certificate", "Ingress", "HTTPRoute"} {
		if len(plain.ofKind(kind)) != 0 {
			t.Errorf("a %s by default", kind)
		}
	}

	existing := helmTemplate(t, "--set", "bridge.tls.enabled=true", "--set", "bridge.tls.secretName=my-bridge-cert")
	cert, key, secret := bridgeTLSFiles(t, existing)
	if secret != "my-bridge-cert" || !strings.HasSuffix(cert, "/tls.crt") || !strings.HasSuffix(key, "/tls.key") {
		t.Errorf("with an existing Secret: cert %q key %q from Secret %q", cert, key, secret)
	}
	if p := servicePort(t, existing); p.Port != 443 || p.Name != "https" || p.TargetPort.StrVal != "https" || p.AppProtocol == nil || *p.AppProtocol != "https" {
		t.Errorf("TLS Service port %+v, want 443 named https, to the container's https port", p)
	}
	if p := servicePort(t, plain); p.Name != "http" || p.TargetPort.StrVal != "http" {
		t.Errorf("plain Service port %+v, want one named http", p)
	}
	// A certManager.issuerRef without a name renders no Certificate, so it is no second source.
	if _, err := helmTemplateErr(t, "--set", "bridge.tls.enabled=true", "--set", "bridge.tls.secretName=my-bridge-cert",
		"--set", "bridge.tls.certManager.issuerRef.kind=ClusterIssuer"); err != nil {
		t.Errorf("secretName with an issuerRef that names no issuer: %v", err)
	}
	if len(existing.ofKind("Certificate")) != 0 {
		t.Error("a Certificate beside an existing Secret")
	}

	issued := helmTemplate(t, "--set", "bridge.tls.enabled=true", "--set", "bridge.tls.certManager.issuerRef.name=team-ca",
		"--set", "bridge.tls.certManager.issuerRef.kind=ClusterIssuer", "--set", "bridge.tls.certManager.dnsNames={mcp.example.com}")
	c := issued.find("Certificate", "mcp-operator-bridge")
	if c == nil {
		t.Fatal("no Certificate with certManager.issuerRef")
	}
	_, _, secret = bridgeTLSFiles(t, issued)
	certSecret, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
	issuer, _, _ := unstructured.NestedStringMap(c.Object, "spec", "issuerRef")
	names, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
	if usages, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "usages"); slices.Contains(usages, "key encipherment") || !slices.Contains(usages, "server auth") {
		t.Errorf("Certificate usages %v: an ECDSA serving key needs server auth and digital signature, not key encipherment", usages)
	}
	if certSecret == "" || certSecret != secret || issuer["name"] != "team-ca" || issuer["kind"] != "ClusterIssuer" {
		t.Errorf("Certificate fills %q for issuer %v; the bridge mounts %q", certSecret, issuer, secret)
	}
	for _, want := range []string{"mcp-operator-bridge." + releaseNS + ".svc", "mcp.example.com"} {
		if !slices.Contains(names, want) {
			t.Errorf("Certificate names %v lack %s", names, want)
		}
	}

	for name, c := range map[string]struct {
		set  []string
		want string
	}{
		"no source":               {[]string{"bridge.tls.enabled=true"}, "needs bridge.tls.secretName"},
		"two sources":             {[]string{"bridge.tls.enabled=true", "bridge.tls.secretName=x", "bridge.tls.certManager.issuerRef.name=ca"}, "not both"},
		"route without a gateway": {[]string{"bridge.httpRoute.enabled=true"}, "needs bridge.httpRoute.parentRefs"},
		"unknown tls key":         {[]string{"bridge.tls.secret=x"}, "secret"},
	} {
		var args []string
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		if _, err := helmTemplateErr(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestBridgeIngressAndRoute(t *testing.T) {
	o := helmTemplate(t, "--set", "bridge.tls.enabled=true", "--set", "bridge.tls.secretName=bridge-cert",
		"--set", "bridge.ingress.enabled=true", "--set", "bridge.ingress.host=mcp.example.com", "--set", "bridge.ingress.className=nginx",
		"--set", "bridge.httpRoute.enabled=true", "--set", "bridge.httpRoute.parentRefs[0].name=public", "--set", "bridge.httpRoute.hostnames={mcp.example.com}")
	ing := o.find("Ingress", "mcp-operator-bridge")
	if ing == nil {
		t.Fatal("no Ingress")
	}
	rules, _, _ := unstructured.NestedSlice(ing.Object, "spec", "rules")
	rule := rules[0].(map[string]any)
	paths, _, _ := unstructured.NestedSlice(rule, "http", "paths")
	svc, _, _ := unstructured.NestedString(paths[0].(map[string]any), "backend", "service", "name")
	port, _, _ := unstructured.NestedFieldNoCopy(paths[0].(map[string]any), "backend", "service", "port", "number")
	class, _, _ := unstructured.NestedString(ing.Object, "spec", "ingressClassName")
	if rule["host"] != "mcp.example.com" || svc != "mcp-operator-bridge" || fmt.Sprint(port) != "443" || class != "nginx" {
		t.Errorf("Ingress rule %v class %q", rule, class)
	}

	route := o.find("HTTPRoute", "mcp-operator-bridge")
	if route == nil {
		t.Fatal("no HTTPRoute")
	}
	parents, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
	hosts, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
	routeRules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	refs, _, _ := unstructured.NestedSlice(routeRules[0].(map[string]any), "backendRefs")
	ref := refs[0].(map[string]any)
	if parents[0].(map[string]any)["name"] != "public" || !slices.Equal(hosts, []string{"mcp.example.com"}) ||
		ref["name"] != "mcp-operator-bridge" || fmt.Sprint(ref["port"]) != "443" {
		t.Errorf("HTTPRoute parents %v hosts %v backend %v", parents, hosts, ref)
	}
}
