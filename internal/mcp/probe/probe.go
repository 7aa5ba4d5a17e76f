// Package probe reads what an MCP server offers — who it is, the protocol
// version agreed, its capabilities, and its tools, resources and prompts —
// within one overall timeout and bounded lists, and builds the namespaced
// catalog. The controller probes servers with it; `manager probe` prints it.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/catalog"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/stdio"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/safeurl"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// Target is the server to probe: exactly one of HTTP and Stdio.
type Target struct {
	HTTP  *streamhttp.Options
	Stdio *stdio.Options
}

// String names the target for messages: a URL as safeurl shows it (it may
// carry a credential).
func (t Target) String() string {
	switch {
	case t.HTTP != nil:
		return safeurl.String(t.HTTP.URL)
	case t.Stdio != nil:
		return strings.Join(append([]string{t.Stdio.Command}, t.Stdio.Args...), " ")
	}
	return "(no target)"
}

// Transport is the target's transport as the API names it.
func (t Target) Transport() v1alpha1.Transport {
	if t.Stdio != nil {
		return v1alpha1.TransportStdio
	}
	return v1alpha1.TransportStreamableHTTP
}

// Options tune a probe.
type Options struct {
	// Server is the <server> of mcp.<server>.<tool>; "" derives one from the
	// server's own name (see DefaultServerName).
	Server string
	// Tools is the MCPServer's spec.tools: overrides, excludes, trust.
	Tools v1alpha1.ToolsSpec
	// Timeout bounds the whole probe: start, handshake, every list (default 10s).
	Timeout time.Duration
	// DiscoverTimeout bounds server/discover (default a third of Timeout, at most 3s).
	DiscoverTimeout time.Duration
	// Limits bound each list.
	Limits client.Limits
	// Era forces a protocol era; "" negotiates.
	Era client.Era
	// ClientVersion is sent in clientInfo.
	ClientVersion string
	// ClientCapabilities are declared to the server, as the bridge will
	// declare them (spec.serverRequests): some servers offer tools only to
	// clients that can answer their requests.
	ClientCapabilities map[string]any
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.DiscoverTimeout <= 0 {
		o.DiscoverTimeout = min(o.Timeout/3, 3*time.Second)
	}
}

// Result is everything a probe found.
type Result struct {
	Server          string
	Transport       v1alpha1.Transport
	Target          string
	Era             client.Era
	ProtocolVersion string
	ServerInfo      client.Implementation
	Capabilities    client.Capabilities
	Instructions    string
	// DiscoverNote says why server/discover did not settle the era, if so.
	DiscoverNote      string
	Catalog           *catalog.Catalog
	Resources         []catalog.Resource
	RejectedResources []catalog.Rejected
	Prompts           []catalog.Prompt
	RejectedPrompts   []catalog.Rejected
	// Skills are the server's skills (the skills extension); Catalog.Digest
	// covers them, so pinning a catalog pins its skills.
	Skills         []catalog.Skill
	RejectedSkills []catalog.Rejected
	Duration       time.Duration
}

// Open starts the transport of t (for stdio: the child process).
func Open(t Target) (jsonrpc.Conn, error) {
	switch {
	case t.HTTP != nil && t.Stdio != nil:
		return nil, errors.New("a probe target is either HTTP or stdio, not both")
	case t.HTTP != nil:
		return streamhttp.New(*t.HTTP)
	case t.Stdio != nil:
		return stdio.Start(*t.Stdio)
	}
	return nil, errors.New("a probe target needs a URL or a command")
}

// Run connects to t, probes it and closes the connection (stopping a stdio
// server). Errors name the target and the step that failed.
func Run(ctx context.Context, t Target, opts Options) (*Result, error) {
	opts.defaults()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	conn, err := Open(t)
	if err != nil {
		return nil, fmt.Errorf("probing %s: %w", t, err)
	}
	defer conn.Close()
	res, err := probe(ctx, conn, opts)
	if err != nil {
		return nil, fmt.Errorf("probing %s: %w", t, explain(conn, err))
	}
	res.Transport, res.Target = t.Transport(), t.String()
	res.Duration = time.Since(start)
	return res, nil
}

// explain adds what a dead or silent stdio server left on stderr.
func explain(conn jsonrpc.Conn, err error) error {
	sc, ok := conn.(*stdio.Conn)
	if !ok {
		return err
	}
	var exit *stdio.ExitError
	if errors.As(err, &exit) {
		return err
	}
	if tail := sc.StderrTail(); tail != "" {
		return fmt.Errorf("%w; server stderr: %s", err, textcut.Tail(tail, 512))
	}
	return err
}

func probe(ctx context.Context, conn jsonrpc.Conn, opts Options) (*Result, error) {
	c, err := client.Connect(ctx, conn, client.Options{
		ClientName: "mcp-operator-probe", ClientVersion: opts.ClientVersion,
		DiscoverTimeout: opts.DiscoverTimeout, Era: opts.Era, Capabilities: opts.ClientCapabilities,
	})
	if err != nil {
		return nil, err
	}
	return List(ctx, c, opts)
}

// List probes an already connected client: the lists of what it advertised,
// then the catalog. Methods it did not advertise are not called.
func List(ctx context.Context, c *client.Client, opts Options) (*Result, error) {
	res := &Result{
		Era: c.Era(), ProtocolVersion: c.ProtocolVersion(), ServerInfo: c.ServerInfo(),
		Capabilities: c.Capabilities(), Instructions: c.Instructions(), DiscoverNote: c.DiscoverNote(),
		Server: opts.Server, Resources: []catalog.Resource{}, Prompts: []catalog.Prompt{},
		Skills: []catalog.Skill{},
	}
	if res.Server == "" {
		res.Server = DefaultServerName(res.ServerInfo.Name)
	}
	caps := c.Capabilities()
	var tools []json.RawMessage
	if caps.Tools {
		items, err := c.ListTools(ctx, opts.Limits)
		if err != nil {
			return nil, err
		}
		tools = items
	}
	cat, err := catalog.Build(res.Server, tools, opts.Tools)
	if err != nil {
		return nil, err
	}
	res.Catalog = cat
	if caps.Resources {
		items, err := c.ListResources(ctx, opts.Limits)
		if err != nil {
			return nil, err
		}
		res.Resources, res.RejectedResources = catalog.Resources(items)
	}
	if caps.Prompts {
		items, err := c.ListPrompts(ctx, opts.Limits)
		if err != nil {
			return nil, err
		}
		res.Prompts, res.RejectedPrompts = catalog.Prompts(res.Server, items)
	}
	if caps.Skills {
		// The list bounds (items, bytes) bound the skills too; each skill's
		// files are bounded by the extension's limits in catalog.ParseSkill.
		items, err := c.ListSkills(ctx, opts.Limits)
		if err != nil {
			return nil, err
		}
		res.Skills, res.RejectedSkills = catalog.Skills(res.Server, items)
		res.Catalog.Digest = catalog.WithSkills(res.Catalog.Digest, res.Skills)
	}
	return res, nil
}

// DefaultServerName turns a server's self-reported name into a DNS label
// for mcp.<server>.<tool>: lowercase, runs of other characters become '-',
// at most 63 characters; "server" when nothing is left.
func DefaultServerName(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	if s == "" {
		return "server"
	}
	return s
}
