package rssmap

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestPackageAndModuleOfSymbols(t *testing.T) {
	for sym, want := range map[string][2]string{
		"k8s.io/api/core/v1.(*Pod).Marshal":            {"k8s.io/api/core/v1", "k8s.io/api"},
		"type:*net/http.Client":                        {"net/http", "(std)"},
		"type:[]github.com/a/b/c/d.T":                  {"github.com/a/b/c/d", "github.com/a/b"},
		"go:itab.*net/http.conn,io.Reader":             {"net/http", "(std)"},
		"go:string.*":                                  {"(go:string)", "(go:string)"},
		"runtime.gcbits.0102":                          {"(runtime)", "(runtime)"},
		"type:map[string]int":                          {"(composite types)", "(composite types)"},
		"runtime.mallocgc":                             {"runtime", "(std)"},
		"sigs.k8s.io/controller-runtime/pkg/cache.New": {"sigs.k8s.io/controller-runtime/pkg/cache", "sigs.k8s.io/controller-runtime"},
	} {
		if got := Package(sym); got != want[0] {
			t.Errorf("Package(%q) = %q, want %q", sym, got, want[0])
		}
		if got := Module(Package(sym)); got != want[1] {
			t.Errorf("Module(Package(%q)) = %q, want %q", sym, got, want[1])
		}
	}
}

// TestAttributesARunningBinary builds a small program with symbols, runs
// it and reads its resident pages: the code that ran (its main, the
// runtime) must be found resident and named.
func TestAttributesARunningBinary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"up\\n\"); os.Stdin.Read(make([]byte, 1)) }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "idle")
	build := exec.Command("go", "build", "-o", bin, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	// A sync point: it has run main once it says so.
	if _, err := stdout.Read(make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	r, err := Attribute(cmd.Process.Pid, bin)
	if err != nil {
		t.Fatal(err)
	}
	var text Section
	for _, s := range r.Sections {
		if s.Name == ".text" {
			text = s
		}
	}
	if text.Resident == 0 || text.Resident > text.Size {
		t.Fatalf(".text: %d of %d bytes resident", text.Resident, text.Size)
	}
	if r.ByPackage[".text"]["runtime"] == 0 || r.ByPackage[".gopclntab"]["runtime"] == 0 {
		t.Fatalf("the runtime's code or function table not found resident: %v", r.ByPackage[".text"])
	}
	if r.ByModule()["(std)"] == 0 {
		t.Fatal("no standard library page by module")
	}
}
