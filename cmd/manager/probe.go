package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"sigs.k8s.io/yaml"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/catalog"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/stdio"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
	"github.com/mcp-operator/mcp-operator/internal/version"
)

// probeOutput is the documented, stable JSON shape of `manager probe -o json`
// (docs/probe.md). Add fields; never rename or remove one.
type probeOutput struct {
	Server          string                `json:"server"`
	Transport       v1alpha1.Transport    `json:"transport"`
	Target          string                `json:"target"`
	ProtocolVersion string                `json:"protocolVersion"`
	Era             client.Era            `json:"era"`
	ServerInfo      client.Implementation `json:"serverInfo"`
	Capabilities    client.Capabilities   `json:"capabilities"`
	Instructions    string                `json:"instructions,omitempty"`
	CatalogDigest   string                `json:"catalogDigest"`
	Tools           []catalog.Tool        `json:"tools"`
	RejectedTools   []catalog.Rejected    `json:"rejectedTools"`
	ExcludedTools   []string              `json:"excludedTools"`
	Resources       []catalog.Resource    `json:"resources"`
	Prompts         []catalog.Prompt      `json:"prompts"`
	Notes           []string              `json:"notes"`
	DurationMs      int64                 `json:"durationMs"`
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type probeFlags struct {
	url, tokenFile, caFile, certFile, keyFile string
	headers, env, exclude, risks              listFlag
	name, output, protocol                    string
	trust                                     bool
	timeout, discoverTimeout                  time.Duration
	limits                                    client.Limits
	command                                   []string
}

func parseProbeFlags(args []string, stderr io.Writer) (*probeFlags, error) {
	fs := flag.NewFlagSet("manager probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: manager probe --url URL [--header K=V]... [--bearer-token-file F] [flags]\n       manager probe [--env K=V]... [flags] -- CMD [ARGS...]\n\nShows what an MCP server offers: protocol version, capabilities, tools with\ntheir risks and flags, resources, prompts, and the catalog digest.\n\nflags:")
		fs.PrintDefaults()
	}
	f := &probeFlags{}
	fs.StringVar(&f.url, "url", "", "Streamable HTTP endpoint of the server (http:// or https://)")
	fs.Var(&f.headers, "header", "extra HTTP header K=V (repeatable)")
	fs.StringVar(&f.tokenFile, "bearer-token-file", "", "file whose content is sent as 'Authorization: Bearer <token>'")
	fs.StringVar(&f.caFile, "ca-file", "", "PEM file of the CA that signed the server's certificate")
	fs.StringVar(&f.certFile, "cert-file", "", "PEM client certificate for mutual TLS (with --key-file)")
	fs.StringVar(&f.keyFile, "key-file", "", "PEM private key of --cert-file")
	fs.Var(&f.env, "env", "environment variable K=V for a stdio server (repeatable); the rest is inherited")
	fs.StringVar(&f.name, "name", "", "the <server> of mcp.<server>.<tool> (default: derived from the server's own name)")
	fs.StringVar(&f.output, "o", "table", "output format: table, json or yaml")
	fs.StringVar(&f.protocol, "protocol", "auto", "protocol era: auto (server/discover, then initialize), stateless or session")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound for the whole probe: start, handshake and every list")
	fs.DurationVar(&f.discoverTimeout, "discover-timeout", 0, "bound for server/discover before falling back to initialize (default: a third of --timeout, at most 3s)")
	fs.Var(&f.exclude, "exclude", "glob of upstream tool names to leave out, as spec.tools.exclude (repeatable)")
	fs.Var(&f.risks, "risk", "risk override TOOL=read|write|network|destructive, as spec.tools.riskOverrides (repeatable)")
	fs.BoolVar(&f.trust, "trust-annotations", false, "let readOnlyHint lower a tool's risk, as spec.tools.trustAnnotations")
	fs.IntVar(&f.limits.MaxPages, "max-pages", client.DefaultLimits.MaxPages, "bound on pages per list")
	fs.IntVar(&f.limits.MaxItems, "max-items", client.DefaultLimits.MaxItems, "bound on items per list")
	fs.Int64Var(&f.limits.MaxBytes, "max-bytes", client.DefaultLimits.MaxBytes, "bound on result bytes per list")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	f.command = fs.Args()
	switch {
	case f.url == "" && len(f.command) == 0:
		return nil, errors.New("give --url URL or -- CMD ARGS")
	case f.url != "" && len(f.command) > 0:
		return nil, errors.New("give either --url or a command, not both")
	case f.output != "table" && f.output != "json" && f.output != "yaml":
		return nil, fmt.Errorf("-o %q: want table, json or yaml", f.output)
	case f.protocol != "auto" && f.protocol != "stateless" && f.protocol != "session":
		return nil, fmt.Errorf("--protocol %q: want auto, stateless or session", f.protocol)
	case f.name != "":
		if err := toolname.ValidateServer(f.name); err != nil {
			return nil, fmt.Errorf("--name: %w", err)
		}
	}
	return f, nil
}

func runProbe(args []string, stdout, stderr io.Writer) int {
	f, err := parseProbeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "manager probe: %v\n", err)
		return 2
	}
	target, opts, err := f.probeSetup()
	if err != nil {
		fmt.Fprintf(stderr, "manager probe: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := probe.Run(ctx, target, opts)
	if err != nil {
		fmt.Fprintf(stderr, "manager probe: %v\n", err)
		return 1
	}
	out := toOutput(res)
	switch f.output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(out)
	case "yaml":
		var data []byte
		if data, err = yaml.Marshal(out); err == nil {
			_, err = stdout.Write(data)
		}
	default:
		err = writeTable(stdout, out)
	}
	if err != nil {
		fmt.Fprintf(stderr, "manager probe: while writing the output: %v\n", err)
		return 1
	}
	return 0
}

// probeSetup turns flags into a target and probe options.
func (f *probeFlags) probeSetup() (probe.Target, probe.Options, error) {
	opts := probe.Options{
		Server: f.name, Timeout: f.timeout, DiscoverTimeout: f.discoverTimeout, Limits: f.limits, ClientVersion: version.String(),
		Tools: v1alpha1.ToolsSpec{Exclude: f.exclude, TrustAnnotations: f.trust},
	}
	if f.protocol != "auto" {
		opts.Era = client.Era(f.protocol)
	}
	for _, r := range f.risks {
		tool, risk, ok := strings.Cut(r, "=")
		switch v1alpha1.Risk(risk) {
		case v1alpha1.RiskRead, v1alpha1.RiskWrite, v1alpha1.RiskNetwork, v1alpha1.RiskDestructive:
		default:
			ok = false
		}
		if !ok || tool == "" {
			return probe.Target{}, opts, fmt.Errorf("--risk %q: want TOOL=read|write|network|destructive", r)
		}
		opts.Tools.RiskOverrides = append(opts.Tools.RiskOverrides, v1alpha1.RiskOverride{Tool: tool, Risk: v1alpha1.Risk(risk)})
	}
	if len(f.command) > 0 {
		if len(f.headers) > 0 || f.tokenFile != "" || f.caFile != "" || f.certFile != "" {
			return probe.Target{}, opts, errors.New("--header, --bearer-token-file and TLS flags apply to --url only")
		}
		for _, kv := range f.env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return probe.Target{}, opts, fmt.Errorf("--env %q: want K=V", kv)
			}
		}
		return probe.Target{Stdio: &stdio.Options{
			Command: f.command[0], Args: f.command[1:], Env: append(os.Environ(), f.env...),
		}}, opts, nil
	}
	if len(f.env) > 0 {
		return probe.Target{}, opts, errors.New("--env applies to a stdio command only")
	}
	h := &streamhttp.Options{URL: f.url, Header: http.Header{}, RequestTimeout: f.timeout}
	for _, kv := range f.headers {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return probe.Target{}, opts, fmt.Errorf("--header %q: want K=V", kv)
		}
		h.Header.Add(k, v)
	}
	if f.tokenFile != "" {
		data, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return probe.Target{}, opts, fmt.Errorf("while reading --bearer-token-file: %w", err)
		}
		if h.BearerToken = strings.TrimSpace(string(data)); h.BearerToken == "" {
			return probe.Target{}, opts, fmt.Errorf("--bearer-token-file %s is empty", f.tokenFile)
		}
	}
	tlsConfig, err := tlsFromFiles(f.caFile, f.certFile, f.keyFile)
	if err != nil {
		return probe.Target{}, opts, err
	}
	h.TLS = tlsConfig
	return probe.Target{HTTP: h}, opts, nil
}

// tlsFromFiles builds the TLS config of --ca-file, --cert-file, --key-file.
func tlsFromFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("while reading --ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--cert-file and --key-file go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("while loading the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func toOutput(res *probe.Result) probeOutput {
	out := probeOutput{
		Server: res.Server, Transport: res.Transport, Target: res.Target,
		ProtocolVersion: res.ProtocolVersion, Era: res.Era, ServerInfo: res.ServerInfo,
		Capabilities: res.Capabilities, Instructions: res.Instructions,
		CatalogDigest: res.Catalog.Digest, Tools: res.Catalog.Tools,
		RejectedTools: res.Catalog.Rejected, ExcludedTools: res.Catalog.Excluded,
		Resources: res.Resources, Prompts: res.Prompts, Notes: []string{},
		DurationMs: res.Duration.Milliseconds(),
	}
	if out.RejectedTools == nil {
		out.RejectedTools = []catalog.Rejected{}
	}
	if out.ExcludedTools == nil {
		out.ExcludedTools = []string{}
	}
	if res.DiscoverNote != "" && res.Era == client.EraSession {
		out.Notes = append(out.Notes, "fell back to initialize: "+res.DiscoverNote)
	}
	for _, r := range res.RejectedPrompts {
		out.Notes = append(out.Notes, "prompt left out: "+r.String())
	}
	for _, r := range res.RejectedResources {
		out.Notes = append(out.Notes, "resource left out: "+r.String())
	}
	return out
}

func writeTable(w io.Writer, out probeOutput) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("Server:\t%s (%s %s)\n", out.Server, printable(out.ServerInfo.Name, 80), printable(out.ServerInfo.Version, 40))
	p("Target:\t%s %s\n", out.Transport, out.Target)
	p("Protocol:\t%s (%s era)\n", out.ProtocolVersion, out.Era)
	p("Capabilities:\t%s\n", capabilityList(out.Capabilities))
	p("Catalog:\t%d tools, digest %s\n", len(out.Tools), out.CatalogDigest)
	p("Probe took:\t%dms\n", out.DurationMs)
	if len(out.Tools) > 0 {
		p("\nTOOL\tRISK\tSOURCE\tFLAGS\tDESCRIPTION\n")
		for _, t := range out.Tools {
			flags := "-"
			if len(t.Flags) > 0 {
				var fs []string
				for _, f := range t.Flags {
					fs = append(fs, string(f))
				}
				flags = strings.Join(fs, ",")
			}
			p("%s\t%s\t%s\t%s\t%s\n", t.Name, t.Risk, t.RiskSource, flags, printable(t.Description, 60))
		}
	}
	for _, r := range out.RejectedTools {
		p("\nleft out: %s\n", printable(r.String(), 200))
	}
	if len(out.ExcludedTools) > 0 {
		p("\nexcluded by --exclude: %s\n", strings.Join(out.ExcludedTools, ", "))
	}
	if len(out.Resources) > 0 {
		p("\nRESOURCE\tNAME\tMIME TYPE\n")
		for _, r := range out.Resources {
			p("%s\t%s\t%s\n", printable(r.URI, 80), printable(r.Name, 40), printable(r.MimeType, 40))
		}
	}
	if len(out.Prompts) > 0 {
		p("\nPROMPT\tARGUMENTS (* required)\n")
		for _, pr := range out.Prompts {
			var args []string
			for _, a := range pr.Arguments {
				s := printable(a.Name, 40)
				if a.Required {
					s += "*"
				}
				args = append(args, s)
			}
			p("%s\t%s\n", printable(pr.Name, 80), strings.Join(args, ", "))
		}
	}
	for _, tl := range out.Tools {
		for _, f := range tl.Findings {
			p("\nsuspect: %s: %s\n", tl.Name, printable(f.String(), 160))
		}
	}
	for _, n := range out.Notes {
		p("\nnote: %s\n", printable(n, 300))
	}
	return tw.Flush()
}

func capabilityList(c client.Capabilities) string {
	var out []string
	add := func(on bool, s string) {
		if on {
			out = append(out, s)
		}
	}
	add(c.Tools, "tools")
	add(c.ToolsListChanged, "tools.listChanged")
	add(c.Resources, "resources")
	add(c.ResourcesSubscribe, "resources.subscribe")
	add(c.Prompts, "prompts")
	add(c.Logging, "logging")
	add(c.Completions, "completions")
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// printable makes untrusted text safe for a terminal: one line, control and
// invisible formatting characters (bidi overrides could reorder what the
// reader sees) shown as escapes, cut to limit characters.
func printable(s string, limit int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == limit {
			b.WriteString("…")
			break
		}
		switch {
		case r == '\n' || r == '\t' || r == '\r':
			b.WriteByte(' ')
		case !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
		n++
	}
	return b.String()
}
