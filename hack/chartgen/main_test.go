package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const crdWithBraces = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.23.0
  name: widgets.example.dev
spec:
  group: example.dev
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        description: 'Templates such as {{ .Values.x }} are kept literally.'
`

// TestGenerate: a CRD's spec is kept (with "{{" made literal for Helm), a
// Role keeps its rules under the release's name, other kinds are left to the
// chart, and the bridge's roles are gated by bridge.enabled.
func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "crd"), "widgets.yaml", crdWithBraces)
	write(t, filepath.Join(dir, "rbac"), "roles.yaml", `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: mcp-operator-leader-election
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: mcp-operator-leader-election
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: mcp-operator-bridge
  labels:
    app.kubernetes.io/component: bridge
`)
	write(t, filepath.Join(dir, "rbac"), "kustomization.yaml", "resources: [roles.yaml]\n")
	files, err := generate(filepath.Join(dir, "crd"), filepath.Join(dir, "rbac"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("generated %d files, want 3 (CRD, Role, ClusterRole): %v", len(files), keys(files))
	}
	crd := string(files["crd-widgets.example.dev.yaml"])
	for _, want := range []string{
		"{{- if .Values.crds.enabled }}",
		"helm.sh/resource-policy: keep",
		"controller-gen.kubebuilder.io/version: v0.23.0",
		`Templates such as {{ "{{" }} .Values.x }} are kept literally.`,
		"spec:\n  group: example.dev\n",
	} {
		if !strings.Contains(crd, want) {
			t.Errorf("CRD template lacks %q:\n%s", want, crd)
		}
	}
	role := string(files["rbac-leader-election.yaml"])
	for _, want := range []string{
		`name: {{ include "mcp-operator.fullname" . }}-leader-election`,
		"namespace: {{ .Release.Namespace }}",
		"- coordination.k8s.io",
		"{{- if .Values.rbac.create }}",
	} {
		if !strings.Contains(role, want) {
			t.Errorf("Role template lacks %q:\n%s", want, role)
		}
	}
	bridge := string(files["rbac-bridge.yaml"])
	for _, want := range []string{"{{- if and .Values.rbac.create .Values.bridge.enabled }}", "rules: []", "app.kubernetes.io/component: bridge"} {
		if !strings.Contains(bridge, want) {
			t.Errorf("bridge ClusterRole template lacks %q:\n%s", want, bridge)
		}
	}
	if strings.Contains(bridge, "namespace:") {
		t.Errorf("a ClusterRole got a namespace:\n%s", bridge)
	}
}

func TestGenerateRejects(t *testing.T) {
	for name, tc := range map[string]struct{ crd, rbac, mention string }{
		"no CRDs":          {"", "", "no CRDs"},
		"not a CRD":        {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "", "not a named CustomResourceDefinition"},
		"CRD without spec": {"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x.y}\n", "", "no top-level spec"},
		"foreign role name": {crdWithBraces,
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: other}\n", `must start with "mcp-operator"`},
		"malformed YAML": {crdWithBraces, "kind: [Role\n", "templating"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "crd"), 0o755)
			os.MkdirAll(filepath.Join(dir, "rbac"), 0o755)
			if tc.crd != "" {
				write(t, filepath.Join(dir, "crd"), "c.yaml", tc.crd)
			}
			if tc.rbac != "" {
				write(t, filepath.Join(dir, "rbac"), "r.yaml", tc.rbac)
			}
			_, err := generate(filepath.Join(dir, "crd"), filepath.Join(dir, "rbac"))
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %v, want one mentioning %q", err, tc.mention)
			}
		})
	}
}

// TestWriteAllRemovesStale: a template whose source is gone is deleted.
func TestWriteAllRemovesStale(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "crd-old.yaml", "stale")
	write(t, dir, "keep.txt", "not a template")
	if err := writeAll(dir, map[string][]byte{"crd-new.yaml": []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "crd-old.yaml")); !os.IsNotExist(err) {
		t.Error("stale template kept")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "crd-new.yaml")); string(b) != "new" {
		t.Errorf("new template = %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep.txt")); err != nil {
		t.Error("a non-YAML file was removed")
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
