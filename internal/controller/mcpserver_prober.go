package controller

import (
	"context"
	"errors"
	"sort"

	"github.com/mcp-operator/mcp-operator/internal/k8s/mcpstatus"
	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/version"
)

// mcpProber probes servers over Streamable HTTP with the project's MCP client
// (internal/mcp): both protocol eras, bounded lists, the namespaced catalog.
type mcpProber struct{}

// NewMCPProber returns the Prober the controller runs with.
func NewMCPProber() Prober { return mcpProber{} }

func (mcpProber) Probe(ctx context.Context, t ProbeTarget) (*Catalog, error) {
	res, err := probe.Run(ctx,
		probe.Target{HTTP: &streamhttp.Options{URL: t.URL, Header: t.Header, TLS: t.TLS, DialTimeout: t.Timeout, TLSHandshakeTimeout: t.Timeout}},
		probe.Options{
			Server: t.Server.Name, Tools: t.Server.Spec.Tools, Timeout: t.Timeout, ClientVersion: version.Version,
			ClientCapabilities: t.Server.Spec.ServerRequests.ClientCapabilities(),
		})
	if err != nil {
		// The error may quote what the server said.
		return nil, errors.New(mcpstatus.Clean(t.Redactor, err.Error()))
	}
	invalid := make([]string, 0, len(res.Catalog.Rejected))
	for _, r := range res.Catalog.Rejected {
		invalid = append(invalid, mcpstatus.Clean(t.Redactor, r.String()))
	}
	sort.Strings(invalid)
	return &Catalog{
		ServerInfo:    *mcpstatus.ServerInfo(res.ServerInfo, res.ProtocolVersion, t.Redactor),
		Capabilities:  *mcpstatus.Capabilities(res.Capabilities),
		Tools:         mcpstatus.Tools(res.Catalog, t.Redactor),
		Invalid:       invalid,
		Prompts:       mcpstatus.Prompts(res.Prompts, t.Redactor),
		Skills:        mcpstatus.Skills(res.Skills, t.Redactor),
		ResourceCount: int32(len(res.Resources)),
		Digest:        res.Catalog.Digest,
	}, nil
}
