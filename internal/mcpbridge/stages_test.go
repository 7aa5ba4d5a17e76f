package mcpbridge

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestStagesWrittenOnce: each stage of the pipeline is called from one
// place, so the order of the stages is written once (serve) and no kind of
// request composes stages by hand. The package's own Go files (tests left
// out) are parsed and type-checked, and every call of a stage function is
// listed with the function it is written in. Two are called from more than
// one place, by design: an adapter's resolve (the available stage resolves
// a request again once the server it woke is back), and answered, the end
// of the forward stage, which a parked call reaches whenever its server
// answers.
func TestStagesWrittenOnce(t *testing.T) {
	want := map[string][]string{
		"adapter.resolve":               {"Bridge.resolveAgain", "Bridge.serve"},
		"adapter.decide":                {"Bridge.serve"},
		"adapter.describe":              {"Bridge.forward"},
		"Bridge.resume":                 {"Bridge.serve"},
		"Bridge.applyGrantsLimitsFloor": {"Bridge.serve"},
		"Bridge.available":              {"Bridge.serve"},
		"Bridge.settle":                 {"Bridge.serve"},
		"Bridge.credential":             {"Bridge.serve"},
		"Bridge.forward":                {"Bridge.serve"},
		// The deadline and CLIENT span of every call upstream.
		"Bridge.sendContext": {"Bridge.forward"},
		// Spans come from the stage wrapper and the call's deadline alone.
		"Bridge.stage":       {"Bridge.traced"},
		"Bridge.forwardSpan": {"Bridge.sendContext"},
		// The end of the forward stage, where a call's answer is observed,
		// run through the output pipeline and recorded: a parked call
		// (parked.go) ends there whenever its server answers it.
		"Bridge.answered": {"Bridge.await", "Bridge.await", "Bridge.forward", "Bridge.leaveUnresumed"},
	}
	got := stageCalls(t)
	for stage, callers := range want {
		if !slices.Equal(got[stage], callers) {
			t.Errorf("%s is called from %v, want %v", stage, got[stage], callers)
		}
	}
	for stage, callers := range got {
		if _, ok := want[stage]; !ok {
			t.Errorf("%s (called from %v) is not listed here", stage, callers)
		}
	}
}

// stageCalls lists, for each stage function, the functions (and methods,
// as Type.method) whose bodies call it, sorted, once per call.
func stageCalls(t *testing.T) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// Only the package's own types matter here: imports are left empty
	// (what refers to them does not type-check, and is not a stage).
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: emptyImporter{}, Error: func(error) {}}
	pkg, _ := conf.Check("mcpbridge", fset, files, info)
	adapterType := pkg.Scope().Lookup("adapter")
	if adapterType == nil {
		t.Fatal("no adapter interface in the package")
	}
	iface := adapterType.Type().Underlying().(*types.Interface)
	stages := map[string]bool{}
	for i := range iface.NumMethods() {
		stages["adapter."+iface.Method(i).Name()] = true
	}
	for _, m := range []string{"resume", "applyGrantsLimitsFloor", "available", "settle", "credential", "forward", "sendContext", "answered", "stage", "forwardSpan"} {
		stages["Bridge."+m] = true
	}

	calls := map[string][]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			caller := fn.Name.Name
			if fn.Recv != nil {
				caller = recvName(fn.Recv.List[0].Type) + "." + caller
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				s := info.Selections[sel]
				if s == nil || s.Kind() != types.MethodVal {
					return true
				}
				recv := s.Recv()
				name := "Bridge"
				switch {
				case types.Identical(recv, adapterType.Type()) || types.Implements(recv, iface):
					name = "adapter"
				case types.TypeString(recv, nil) != "*mcpbridge.Bridge" && types.TypeString(recv, nil) != "mcpbridge.Bridge":
					return true
				}
				if stage := name + "." + sel.Sel.Name; stages[stage] {
					calls[stage] = append(calls[stage], caller)
				}
				return true
			})
		}
	}
	for _, callers := range calls {
		slices.Sort(callers)
	}
	return calls
}

// recvName is a method's receiver type's name: Bridge for *Bridge.
func recvName(e ast.Expr) string {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

// emptyImporter gives every import as an empty package.
type emptyImporter struct{}

func (emptyImporter) Import(path string) (*types.Package, error) {
	p := types.NewPackage(path, filepath.Base(path))
	p.MarkComplete()
	return p, nil
}
