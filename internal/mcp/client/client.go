// Package client is the MCP client every part of the operator uses to talk
// to upstream servers: it connects in either protocol era (server/discover
// for the stateless 2026-07-28 revision, initialize for 2025-11-25 and older),
// lists with bounded pagination, and calls tools with raw JSON in and out —
// schemas and results are never re-typed. Transports are jsonrpc.Conn
// (streamhttp, stdio).
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/protocol"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Protocol versions this client speaks (package protocol names them).
const (
	StatelessVersion = protocol.StatelessVersion
	LatestLegacy     = protocol.LatestLegacy
)

// LegacyVersions are the session-era revisions, newest first.
var LegacyVersions = protocol.LegacyVersions

// Era is how a connection talks to its server.
type Era string

const (
	// EraStateless is the 2026-07-28 revision: server/discover, no session.
	EraStateless Era = "stateless"
	// EraSession is 2025-11-25 and older: initialize, then a session.
	EraSession Era = "session"
)

// Meta keys of the stateless revision's per-request _meta.
const (
	metaProtocolVersion    = protocol.MetaProtocolVersion
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities = protocol.MetaClientCapabilities
	metaServerInfo         = protocol.MetaServerInfo
)

// Options tune Connect.
type Options struct {
	// ClientName and ClientVersion identify us to the server.
	ClientName    string
	ClientVersion string
	// DiscoverTimeout bounds server/discover (default 3s): a legacy server
	// may ignore it, and must not hang the connect.
	DiscoverTimeout time.Duration
	// Era forces one era ("" tries stateless first, then falls back).
	Era Era
	// Capabilities are the client capabilities declared to the server (in
	// initialize, or in each request's _meta); nil declares none.
	Capabilities map[string]any
}

// Implementation is a server's self-description.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Title   string `json:"title,omitempty"`
}

// Capabilities are what the server advertised; Raw keeps all of it.
type Capabilities struct {
	Tools              bool `json:"tools"`
	ToolsListChanged   bool `json:"toolsListChanged"`
	Resources          bool `json:"resources"`
	ResourcesSubscribe bool `json:"resourcesSubscribe"`
	Prompts            bool `json:"prompts"`
	Logging            bool `json:"logging"`
	Completions        bool `json:"completions"`
	// Skills: the server declares the skills extension
	// (io.modelcontextprotocol/skills) and serves skills/list and skills/get.
	Skills bool            `json:"skills"`
	Raw    json.RawMessage `json:"-"`
}

// Client is a connected MCP server. It is safe for concurrent use.
type Client struct {
	conn         jsonrpc.Conn
	opts         Options
	era          Era
	version      string
	info         Implementation
	caps         Capabilities
	instructions string
	discoverNote string
	// sessionVersion is the newest session-era version a stateless server
	// also listed in server/discover ("" when it speaks only its era).
	sessionVersion string
	// capabilities are Options.Capabilities, encoded once by Connect.
	capabilities json.RawMessage
	// meta is the stateless era's per-request _meta, encoded once.
	meta []rawjson.Member

	paramMu      sync.Mutex
	paramHeaders map[string][]paramBinding // by tool name, from the last ListTools
}

// Connect negotiates with the server behind conn. On failure conn is left
// open: the caller owns it (and its exit status, for stdio).
func Connect(ctx context.Context, conn jsonrpc.Conn, opts Options) (*Client, error) {
	if opts.ClientName == "" {
		opts.ClientName = "mcp-operator"
	}
	if opts.ClientVersion == "" {
		opts.ClientVersion = "dev"
	}
	if opts.DiscoverTimeout <= 0 {
		opts.DiscoverTimeout = 3 * time.Second
	}
	c := &Client{conn: conn, opts: opts, capabilities: json.RawMessage(`{}`)}
	if opts.Capabilities != nil {
		// Checked here, before anything is sent: a value json cannot encode
		// would otherwise leave a hole in every request's _meta.
		caps, err := json.Marshal(opts.Capabilities)
		if err != nil {
			return nil, fmt.Errorf("the client capabilities cannot be encoded as JSON: %w", err)
		}
		c.capabilities = caps
	}
	requested := LatestLegacy
	if opts.Era != EraSession {
		ok, legacy, err := c.discover(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			return c, nil
		}
		if opts.Era == EraStateless {
			return nil, fmt.Errorf("while discovering the server (server/discover): %s, and the stateless era was required", c.discoverNote)
		}
		if legacy != "" {
			requested = legacy
		}
	}
	if err := c.initialize(ctx, requested); err != nil {
		return nil, err
	}
	return c, nil
}

// discover tries server/discover. ok means the stateless era was agreed;
// otherwise legacy is the best session-era version the server listed, if any.
// err is set only when the caller's own context ended.
func (c *Client) discover(ctx context.Context) (ok bool, legacy string, err error) {
	c.conn.SetProtocolVersion(StatelessVersion)
	dctx, cancel := context.WithTimeout(ctx, c.opts.DiscoverTimeout)
	defer cancel()
	start := time.Now()
	meta, err := c.requestMeta(StatelessVersion)
	if err != nil {
		return false, "", err
	}
	params := rawjson.AppendObject(nil, []rawjson.Member{{Key: "_meta", Value: rawjson.AppendObject(nil, meta)}})
	resp, cerr := c.conn.Call(dctx, jsonrpc.NewRequest(0, "server/discover", params))
	c.conn.SetProtocolVersion("")
	switch {
	case ctx.Err() != nil:
		return false, "", fmt.Errorf("while discovering the server (server/discover): %w", ctx.Err())
	case cerr != nil && dctx.Err() != nil:
		c.discoverNote = fmt.Sprintf("no answer to server/discover within %s", time.Since(start).Round(time.Millisecond))
		return false, "", nil
	case cerr != nil:
		c.discoverNote = "server/discover failed: " + cerr.Error()
		return false, "", nil
	case resp.Error != nil:
		c.discoverNote = "server/discover refused: " + resp.Error.Error()
		return false, bestLegacy(unsupportedVersions(resp.Error)), nil
	}
	var res struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      json.RawMessage            `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		c.discoverNote = "server/discover answered with a malformed result: " + err.Error()
		return false, "", nil
	}
	if !slices.Contains(res.SupportedVersions, StatelessVersion) {
		c.discoverNote = fmt.Sprintf("server/discover lists only %v", res.SupportedVersions)
		return false, bestLegacy(res.SupportedVersions), nil
	}
	if err := c.setCapabilities(res.Capabilities); err != nil {
		return false, "", fmt.Errorf("while reading the answer to server/discover: %w", err)
	}
	if raw, found := res.Meta[metaServerInfo]; found {
		_ = json.Unmarshal(raw, &c.info)
	}
	c.era, c.version, c.instructions = EraStateless, StatelessVersion, res.Instructions
	c.sessionVersion = bestLegacy(res.SupportedVersions)
	c.meta = meta
	c.conn.SetProtocolVersion(StatelessVersion)
	return true, "", nil
}

func unsupportedVersions(e *jsonrpc.Error) []string {
	var data struct {
		Supported []string `json:"supported"`
	}
	if e.Code == jsonrpc.CodeUnsupportedProtocolVersion {
		_ = json.Unmarshal(e.Data, &data)
	}
	return data.Supported
}

// bestLegacy is the newest session-era version both sides know.
func bestLegacy(offered []string) string {
	for _, v := range LegacyVersions {
		if slices.Contains(offered, v) {
			return v
		}
	}
	return ""
}

func (c *Client) initialize(ctx context.Context, requested string) error {
	params, err := json.Marshal(map[string]any{
		"protocolVersion": requested,
		"capabilities":    c.capabilities,
		"clientInfo":      Implementation{Name: c.opts.ClientName, Version: c.opts.ClientVersion},
	})
	if err != nil {
		return fmt.Errorf("while encoding initialize: %w", err)
	}
	resp, err := c.conn.Call(ctx, jsonrpc.NewRequest(0, "initialize", params))
	if err != nil {
		return c.withDiscoverNote(fmt.Errorf("while initializing the session (initialize): %w", err))
	}
	if resp.Error != nil {
		return c.withDiscoverNote(fmt.Errorf("while initializing the session (initialize): %w", resp.Error))
	}
	var res struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      Implementation  `json:"serverInfo"`
		Instructions    string          `json:"instructions"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return fmt.Errorf("while reading the answer to initialize: malformed result: %w", err)
	}
	if !slices.Contains(LegacyVersions, res.ProtocolVersion) {
		return fmt.Errorf("while initializing the session: the server chose protocol version %q, which this client does not speak (it offered %s)", res.ProtocolVersion, requested)
	}
	if err := c.setCapabilities(res.Capabilities); err != nil {
		return fmt.Errorf("while reading the answer to initialize: %w", err)
	}
	c.era, c.version, c.info, c.instructions = EraSession, res.ProtocolVersion, res.ServerInfo, res.Instructions
	c.conn.SetProtocolVersion(res.ProtocolVersion)
	if err := c.conn.Notify(ctx, jsonrpc.NewNotification("notifications/initialized", nil)); err != nil {
		return fmt.Errorf("while confirming the session (notifications/initialized): %w", err)
	}
	return nil
}

func (c *Client) withDiscoverNote(err error) error {
	if c.discoverNote == "" {
		return err
	}
	return fmt.Errorf("%w (before that, %s)", err, c.discoverNote)
}

func (c *Client) setCapabilities(raw json.RawMessage) error {
	var caps map[string]json.RawMessage
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &caps); err != nil {
			return fmt.Errorf("capabilities are not a JSON object: %w", err)
		}
	}
	has := func(k string) bool { v, ok := caps[k]; return ok && string(v) != "null" }
	flag := func(k, sub string) bool {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(caps[k], &m)
		return string(m[sub]) == "true"
	}
	c.caps = Capabilities{
		Tools: has("tools"), ToolsListChanged: flag("tools", "listChanged"),
		Resources: has("resources"), ResourcesSubscribe: flag("resources", "subscribe"),
		Prompts: has("prompts"), Logging: has("logging"), Completions: has("completions"),
		Skills: has("resources") && declares(caps["extensions"], SkillsExtension),
		Raw:    raw,
	}
	return nil
}

// Era is the protocol era agreed on.
func (c *Client) Era() Era { return c.era }

// ProtocolVersion is the version negotiated.
func (c *Client) ProtocolVersion() string { return c.version }

// ServerInfo is what the server said about itself.
func (c *Client) ServerInfo() Implementation { return c.info }

// Capabilities are what the server advertised.
func (c *Client) Capabilities() Capabilities { return c.caps }

// Instructions is the server's usage text for models (untrusted).
func (c *Client) Instructions() string { return c.instructions }

// SpeaksSessionsToo is whether a server connected in the stateless era also
// listed a session-era version in server/discover: it can be called in either.
func (c *Client) SpeaksSessionsToo() bool { return c.era == EraStateless && c.sessionVersion != "" }

// DiscoverNote says why server/discover did not settle the era ("" when it did
// or was not tried).
func (c *Client) DiscoverNote() string { return c.discoverNote }

// Conn is the transport under the client.
func (c *Client) Conn() jsonrpc.Conn { return c.conn }

// SetNotificationHandler passes on the server's notifications.
func (c *Client) SetNotificationHandler(h jsonrpc.NotificationHandler) {
	c.conn.SetNotificationHandler(h)
}

// requestMeta is the stateless revision's per-request _meta, each value
// encoded, sorted by key.
func (c *Client) requestMeta(version string) ([]rawjson.Member, error) {
	values := map[string]any{
		metaProtocolVersion:    version,
		metaClientInfo:         Implementation{Name: c.opts.ClientName, Version: c.opts.ClientVersion},
		metaClientCapabilities: c.capabilities,
	}
	meta := make([]rawjson.Member, 0, len(values))
	for k, v := range values {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("while encoding the request's _meta (%s): %w", k, err)
		}
		meta = append(meta, rawjson.Member{Key: k, Value: raw})
	}
	slices.SortFunc(meta, func(a, b rawjson.Member) int { return strings.Compare(a.Key, b.Key) })
	return meta, nil
}

// Call sends any request with raw params and returns the raw result. A
// JSON-RPC error from the server is returned as a *jsonrpc.Error (wrapped).
func (c *Client) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return c.call(ctx, method, params, nil)
}

func (c *Client) call(ctx context.Context, method string, params json.RawMessage, header http.Header) (json.RawMessage, error) {
	if c.era == EraStateless {
		var err error
		if params, err = c.withMeta(params); err != nil {
			return nil, fmt.Errorf("while sending %s: %w", method, err)
		}
	}
	req := jsonrpc.NewRequest(0, method, params)
	req.Header = header
	resp, err := c.conn.Call(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("while calling %s: %w", method, resp.Error)
	}
	return resp.Result, nil
}

// withMeta adds the stateless revision's per-request _meta, keeping every
// other byte of params as it was. It runs on every call: the _meta is
// encoded once (c.meta) and spliced in, without decoding params.
func (c *Client) withMeta(params json.RawMessage) (json.RawMessage, error) {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	fields, err := rawjson.Members(params)
	if err != nil {
		return nil, fmt.Errorf("params are not a JSON object: %w", err)
	}
	var meta []rawjson.Member
	out := make([]rawjson.Member, 0, len(fields)+1)
	for _, f := range fields {
		if f.Key != "_meta" {
			out = append(out, f)
			continue
		}
		if string(f.Value) == "null" {
			continue // null is absent, as encoding/json reads it: ours is added below
		}
		if meta, err = rawjson.Members(f.Value); err != nil {
			return nil, fmt.Errorf("params._meta is not a JSON object: %w", err)
		}
	}
	for _, m := range c.meta {
		if !slices.ContainsFunc(meta, func(set rawjson.Member) bool { return set.Key == m.Key }) {
			meta = append(meta, m)
		}
	}
	out = append(out, rawjson.Member{Key: "_meta", Value: rawjson.AppendObject(nil, meta)})
	return rawjson.AppendObject(make([]byte, 0, len(params)+256), out), nil
}

// CallTool calls a tool with raw JSON arguments (nil means none: sent as {},
// which servers that reject null accept) and returns the raw result. In the
// stateless era, arguments the tool's schema mirrors into headers
// (x-mcp-header, learned by ListTools) are sent as Mcp-Param-* headers.
func (c *Client) CallTool(ctx context.Context, name string, arguments json.RawMessage) (json.RawMessage, error) {
	if len(arguments) == 0 || string(arguments) == "null" {
		arguments = json.RawMessage(`{}`)
	}
	params, err := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{name, arguments})
	if err != nil {
		return nil, fmt.Errorf("while encoding the arguments of tool %q: %w", name, err)
	}
	var header http.Header
	if c.era == EraStateless {
		header = c.paramHeadersFor(name, arguments)
	}
	return c.call(ctx, "tools/call", params, header)
}

// CallToolParams calls a tool with the whole params object as given (name,
// arguments and _meta such as a progressToken), byte for byte: the bridge
// forwards an agent's call this way. Mcp-Param-* headers are derived from
// its arguments as CallTool does.
func (c *Client) CallToolParams(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	var header http.Header
	if c.era == EraStateless {
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("while sending tools/call: params are not a JSON object: %w", err)
		}
		header = c.paramHeadersFor(p.Name, p.Arguments)
	}
	return c.call(ctx, "tools/call", params, header)
}

// Ping checks the server answers: ping in the session era; the stateless
// revision has no ping, so server/discover stands in for it.
func (c *Client) Ping(ctx context.Context) error {
	method := "ping"
	if c.era == EraStateless {
		method = "server/discover"
	}
	_, err := c.Call(ctx, method, nil)
	return err
}

// Close ends the session (HTTP) or stops the server (stdio).
func (c *Client) Close() error { return c.conn.Close() }

// ErrNotAdvertised is returned for a list method the server did not offer.
var ErrNotAdvertised = errors.New("the server did not advertise this capability")
