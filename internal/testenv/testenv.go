// Package testenv starts a real kube-apiserver and etcd (envtest) with the
// project's CRDs installed, for integration tests. The binaries are built from
// Go modules by `make envtest-assets` into bin/k8s.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Scheme knows the built-in kinds and the project's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(mcpv1alpha1.AddToScheme(s))
	return s
}

// RepoRoot is the directory holding the project's go.mod, found by walking up
// from the working directory (go test runs each package in its own directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.HasPrefix(string(data), "module github.com/mcp-operator/mcp-operator\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.mod of github.com/mcp-operator/mcp-operator above the working directory")
		}
		dir = parent
	}
}

// Start runs an API server (New) for one test or benchmark, stopped when it
// ends, and returns the configuration to reach it; it fails the test when
// the server cannot start.
func Start(t interface {
	Helper()
	Fatal(...any)
	Cleanup(func())
}) *rest.Config {
	t.Helper()
	env, err := New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return cfg
}

// New returns an envtest environment with the CRDs of config/crd/bases. It uses
// KUBEBUILDER_ASSETS when set, else bin/k8s, and fails with a message that says
// how to build the binaries when they are missing.
func New() (*envtest.Environment, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, name)); err != nil {
			return nil, fmt.Errorf("testenv: %s not found in %s: run 'make envtest-assets' (or 'make test', which does it)", name, assets)
		}
	}
	return &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}, nil
}
