// Package version holds the build's version, set by the linker
// (-X github.com/mcp-operator/mcp-operator/internal/version.Version=...).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release or git describe of the build; "dev" when not stamped.
var Version = "dev"

// String describes the build in one line: version, Go version, platform and,
// when the binary carries it, the VCS revision.
func String() string {
	rev := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				rev = " revision " + s.Value
			}
		}
	}
	return fmt.Sprintf("mcp-operator %s (%s %s/%s%s)", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, rev)
}
