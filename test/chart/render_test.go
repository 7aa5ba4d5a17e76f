// Package chart_test renders the Helm chart (charts/mcp-operator, with the
// real helm built into bin/ by `make test`) and the kustomize tree
// (config/default, with bin/kustomize) and checks the objects users get: CRDs
// and RBAC equal to their generated sources, the labels the controller's
// NetworkPolicies select on, hardened pods, images, values that switch parts
// on and off, and a values schema that rejects mistakes.
package chart_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

const (
	releaseNS = "mcp-operator-system"
	chartDir  = "charts/mcp-operator"
)

// objects is a rendered manifest, in order.
type objects []*unstructured.Unstructured

func (o objects) find(kind, name string) *unstructured.Unstructured {
	for _, u := range o {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

func (o objects) ofKind(kind string) objects {
	var out objects
	for _, u := range o {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// tool returns bin/NAME, failing with the make target that builds it.
func tool(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run 'make test' (it builds bin/%s from hack/deploytools)", p, name)
	}
	return p
}

// run executes a tool from the repository root and returns its stdout, or the
// error with its stderr.
func run(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = repoRoot(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func parse(t *testing.T, manifest string) objects {
	t.Helper()
	var out objects
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(manifest, -1) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// helmTemplate renders the chart as release "mcp-operator" (unless the args
// name another) in namespace mcp-operator-system.
func helmTemplate(t *testing.T, args ...string) objects {
	t.Helper()
	out, err := helmTemplateErr(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, out)
}

func helmTemplateErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	release := "mcp-operator"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		release, args = args[0], args[1:]
	}
	// helm template assumes Kubernetes 1.20 unless told, which the chart's
	// kubeVersion refuses: render for the oldest version the chart takes.
	return run(t, tool(t, "helm"), append([]string{"template", release, chartDir, "--namespace", releaseNS, "--kube-version", minKubeVersion}, args...)...)
}

// minKubeVersion is the oldest Kubernetes the chart's kubeVersion accepts.
const minKubeVersion = "1.32.0"

func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v); err != nil {
		t.Fatalf("converting %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return &v
}

// sourceObjects parses every YAML document of the files matching glob.
func sourceObjects(t *testing.T, glob string) objects {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot(t), glob))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no files match %s: %v", glob, err)
	}
	var out objects
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, parse(t, string(data))...)
	}
	return out
}
