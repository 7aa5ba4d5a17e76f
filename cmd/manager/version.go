package main

import (
	"fmt"
	"io"

	"github.com/mcp-operator/mcp-operator/internal/version"
)

func runVersion(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, version.String())
	return 0
}
