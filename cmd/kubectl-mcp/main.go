// Command kubectl-mcp is the kubectl plugin of mcp-operator (`kubectl mcp`):
// it lists the ToolApprovals waiting for a person, approves and denies them
// under the caller's own name, puts servers to sleep and wakes them, and
// answers "may this subject call this tool"
// from the same permission engine the bridge uses, without calling anything.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// command is one subcommand: it gets its own flag set (the common flags are
// on it already) and the positional arguments.
type command struct {
	usage   string
	summary string
	flags   func(fs *flag.FlagSet) func(e *env, args []string) error
}

var commands = map[string]command{
	"approvals": {"approvals [-A] [--all]", "list the ToolApprovals waiting for a decision", approvalsCmd},
	"approve":   {"approve NAME [--session] [--comment TEXT]", "approve a waiting request (once, or for the agent's session)", approveCmd},
	"deny":      {"deny NAME [--comment TEXT]", "deny a waiting request", denyCmd},
	"sleep":     {"sleep SERVER", "put a workload MCPServer to sleep (its pod goes, its tools stay listed; the next call wakes it)", sleepCmd},
	"wake":      {"wake SERVER", "wake a sleeping MCPServer, as a call does", wakeCmd},
	"can-i":     {"can-i TOOL --as USER [--as-group G]... [--args JSON] [--risk R]", "may this subject call this tool with these arguments, and which rule says so", canICmd},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errDenied makes can-i exit 1, as kubectl auth can-i does for "no".
var errDenied = errors.New("denied")

// env is what a command works with.
type env struct {
	client    client.Client
	clientset kubernetes.Interface
	namespace string
	out       io.Writer
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kubectl mcp: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	fs := flag.NewFlagSet("kubectl mcp "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: kubectl mcp %s\n\n%s.\n\nflags:\n", cmd.usage, cmd.summary)
		fs.PrintDefaults()
	}
	kubeconfig := fs.String("kubeconfig", "", "path of the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context to use")
	var namespace string
	fs.StringVar(&namespace, "namespace", "", "namespace (default: the context's)")
	fs.StringVar(&namespace, "n", "", "short for --namespace")
	do := cmd.flags(fs)
	positional, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	e, err := connect(*kubeconfig, *kubeContext, namespace)
	if err == nil {
		e.out = stdout
		err = do(e, positional)
	}
	switch {
	case errors.Is(err, errDenied):
		return 1
	case err != nil:
		fmt.Fprintln(stderr, "kubectl mcp "+args[0]+":", err)
		return 1
	}
	return 0
}

// parseInterspersed lets flags come after positional arguments, as kubectl
// users type them (approve NAME --comment ...).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// connect reads the kubeconfig the way kubectl does.
func connect(kubeconfig, kubeContext, namespace string) (*env, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubeContext}
	overrides.Context.Namespace = namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("while reading the kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("while reading the namespace from the kubeconfig: %w", err)
	}
	return newEnv(cfg, ns)
}

func newEnv(cfg *rest.Config, namespace string) (*env, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(mcpv1alpha1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &env{client: c, clientset: cs, namespace: namespace}, nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kubectl mcp <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\ncommon flags: --kubeconfig, --context, -n/--namespace; 'kubectl mcp <command> -h' lists the others.")
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
