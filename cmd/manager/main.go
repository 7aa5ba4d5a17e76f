// Command manager is mcp-operator's one binary. Each role is a subcommand, so a
// single image serves the controller, the bridge and the in-pod stdio adapter.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// subcommand is one role of the binary. run gets the arguments after the
// subcommand's name and returns the process exit code.
type subcommand struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var subcommands = map[string]subcommand{
	"controller":    {"run the MCPServer and ToolPolicy controllers", runController},
	"bridge":        {"serve the policy-enforcing MCP endpoint for agents", runBridge},
	"console":       {"serve the web console where people decide approvals and see servers, policies and activity", runConsole},
	"stdio-adapter": {"serve a stdio MCP server over Streamable HTTP (runs inside server pods)", runStdioAdapter},
	"probe":         {"show what an MCP server offers: tools, risks, resources, prompts", runProbe},
	"version":       {"print the build's version", runVersion},
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "manager: unknown subcommand %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: manager <subcommand> [flags]\n\nsubcommands:")
	names := make([]string, 0, len(subcommands))
	for name := range subcommands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-14s %s\n", name, subcommands[name].summary)
	}
	fmt.Fprintln(w, "\n'manager <subcommand> -h' lists a subcommand's flags.")
}
