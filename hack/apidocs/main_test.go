package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReferenceListsFieldsDefaultsAndRules(t *testing.T) {
	var out bytes.Buffer
	if err := run("../../config/crd/bases", &out); err != nil {
		t.Fatal(err)
	}
	doc := out.String()
	for _, want := range []string{
		"## MCPServer", "## ToolPolicy", "short names: `mcps`", "short names: `tp`",
		"| `spec.workload.port` | integer |", "default: `8080`",
		"| `spec.workload.volumes` | []core/v1.Volume |",
		`rejected with "exactly one of spec.workload`,
		"| `spec.subjects[]` | rule |",
		"one of: `allow`, `deny`, `ask`",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("reference lacks %q", want)
		}
	}
	// Core types are linked, not expanded: no field of corev1.Volume appears.
	if strings.Contains(doc, "spec.workload.volumes[].hostPath") {
		t.Error("reference expands core/v1.Volume")
	}
}

func TestRejectsAFileThatIsNotACRD(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("spec:\n  nonsense: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(dir, &out)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Fatalf("want an error naming bad.yaml, got %v", err)
	}
}
