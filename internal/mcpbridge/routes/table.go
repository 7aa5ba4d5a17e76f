// Package routes decides which MCP servers the bridge serves and how to
// reach them. Build turns MCPServer objects into a Table (a pure function:
// Ready servers with an endpoint, one per name, and the servers away: not
// serving now, their catalog published); the Registry keeps one
// upstream connection per served server and the live catalog of each,
// serving only tools whose live definition still has the schema digest the
// controller published; Watch feeds the Registry from an informer cache.
package routes

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Server is one served MCPServer, as its status describes it.
type Server struct {
	Namespace, Name string
	// URL and Pod are status.endpoint: a new pod means a restart.
	URL, Pod string
	// Tools are the published tools by upstream name.
	Tools map[string]v1alpha1.ToolStatus
	// ToolsSpec is spec.tools, needed to rebuild the catalog from a live
	// list exactly as the controller did.
	ToolsSpec     v1alpha1.ToolsSpec
	CatalogDigest string
	// Skills are the published skills by the URI of their SKILL.md: the
	// bridge serves a skill only while its live entry has this digest.
	Skills       map[string]v1alpha1.SkillStatus
	Capabilities v1alpha1.ServerCapabilities
	Restarts     v1alpha1.RestartStatus
	// Remote is spec.remote (credentials are resolved by the watcher).
	Remote *v1alpha1.Remote
	// ServerRequests is spec.serverRequests: which of the server's own
	// requests the bridge relays to agents.
	ServerRequests v1alpha1.ServerRequests
}

// Key is namespace/name.
func (s *Server) Key() string { return s.Namespace + "/" + s.Name }

// Table is the set of served servers by name (names are unique in a
// bridge's scope).
type Table struct {
	Servers map[string]*Server
	// Names are the served server names, sorted.
	Names []string
	// Restarts are the restart counts of every MCPServer seen, served or
	// not, by namespace/name: a server that crashed leaves the table (it is
	// not Ready) in the same status write that counts the crash, and the
	// Registry tells a crash (its sessions went with the process) from a
	// server stopped or moved.
	Restarts map[string]v1alpha1.RestartStatus
	// Away are the servers with a published catalog that are not served
	// now, by name (names served are not among them).
	Away map[string]*Away
	// Down are the servers of the scope not served and without a catalog
	// (gave up, catalog refused, never published), by name: nothing of
	// theirs is listed, but a request already routed to one (waiting for
	// its wake) is answered with its Ready reason.
	Down map[string]*Away
}

// Build makes the table from MCPServers: only Ready ones with an endpoint
// and no NameConflict; when two still share a name, the older keeps it (as
// the controller decides), ties broken by namespace.
func Build(list []v1alpha1.MCPServer) *Table {
	sorted := make([]*v1alpha1.MCPServer, 0, len(list))
	restarts := make(map[string]v1alpha1.RestartStatus, len(list))
	for i := range list {
		s := &list[i]
		restarts[s.Namespace+"/"+s.Name] = s.Status.Restarts
		if s.DeletionTimestamp != nil || s.Spec.Suspend || s.Status.Endpoint == nil || s.Status.Endpoint.URL == "" ||
			!meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) ||
			meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionNameConflict) {
			continue
		}
		sorted = append(sorted, s)
	}
	slices.SortFunc(sorted, func(a, b *v1alpha1.MCPServer) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace, b.Namespace)
	})
	t := &Table{Servers: map[string]*Server{}, Restarts: restarts}
	for _, s := range sorted {
		if _, taken := t.Servers[s.Name]; taken {
			continue
		}
		srv := serverOf(s)
		t.Servers[s.Name] = srv
		t.Names = append(t.Names, s.Name)
	}
	slices.Sort(t.Names)
	t.Away, t.Down = away(list, t.Servers)
	return t
}

// serverOf is s as the bridge routes to it.
func serverOf(s *v1alpha1.MCPServer) *Server {
	srv := &Server{
		Namespace: s.Namespace, Name: s.Name,
		Tools:          map[string]v1alpha1.ToolStatus{},
		ToolsSpec:      s.Spec.Tools,
		CatalogDigest:  s.Status.CatalogDigest,
		Restarts:       s.Status.Restarts,
		Remote:         s.Spec.Remote,
		ServerRequests: s.Spec.ServerRequests,
	}
	if e := s.Status.Endpoint; e != nil {
		srv.URL, srv.Pod = e.URL, e.PodName
	}
	if s.Status.Capabilities != nil {
		srv.Capabilities = *s.Status.Capabilities
	}
	for _, tool := range s.Status.Tools {
		srv.Tools[tool.UpstreamName] = tool
	}
	if len(s.Status.Skills) > 0 {
		srv.Skills = make(map[string]v1alpha1.SkillStatus, len(s.Status.Skills))
		for _, sk := range s.Status.Skills {
			srv.Skills[sk.URI] = sk
		}
	}
	return srv
}
