package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRepoRootFindsTheProjectModule(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "module github.com/mcp-operator/mcp-operator\n") {
		t.Fatalf("%s/go.mod is not the project's module", root)
	}
}

func TestNewSaysHowToBuildMissingBinaries(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	_, err := New()
	if err == nil || !strings.Contains(err.Error(), "make envtest-assets") {
		t.Fatalf("want an error that names make envtest-assets, got %v", err)
	}
}
