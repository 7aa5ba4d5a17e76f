package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestStringNamesVersionAndPlatform(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v1.2.3"
	s := String()
	for _, want := range []string{"mcp-operator v1.2.3", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, want it to contain %q", s, want)
		}
	}
}
