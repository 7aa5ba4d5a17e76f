package mcpbridge

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/catalog"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// reasonSkillMismatch: a skill's live entry or file is not what the
// controller published (changed behind a pinned catalog, or a file whose
// bytes do not match its digest).
const reasonSkillMismatch = "skill_mismatch"

// listSkills answers skills/list: every server's live skills whose entry
// is the published one and which the caller's policy allows, URIs in the
// caller's view. A changed skill is left out (and logged) until the
// controller publishes it again, as a changed tool is.
func (b *Bridge) listSkills(rq *request) *jsonrpc.Message {
	eng := b.engine.Load()
	var items [][]byte
	f := newFreshness()
	for _, name := range b.servers(rq) {
		s, conn, ok := b.cfg.Registry.Server(name)
		if !ok || !s.Capabilities.Skills || len(s.Skills) == 0 {
			continue
		}
		ctx, cancel := b.contextWithCallTimeout(rq.ctx)
		list, fresh, err := conn.ListAllFresh(ctx, "skills/list", "skills")
		cancel()
		if err != nil {
			b.cfg.Log.Info("a server's skills are left out of the list", "server", name, "error", b.redactor(s).String(err.Error(), nil))
			continue
		}
		f.server(fresh)
		for _, raw := range list {
			sk, err := b.publishedSkill(s, raw)
			if err != nil {
				continue
			}
			get := policy.SkillGet{Name: sk.Name, Server: s.Name, Namespace: s.Namespace}
			if eng.DecideSkill(rq.id.Subject(), get).Decision != v1alpha1.DecisionAllow {
				continue
			}
			items = append(items, b.skillEntry(rq, s, raw, sk))
		}
	}
	out := rawjson.Set([]byte(`{"resultType":"complete"}`), "skills", rawjson.AppendArray(nil, items))
	return rpcResult(rq, withCacheHints(rq, out, f, scopePrivate))
}

// skillGet is the skills adapter of the pipeline: one skills/get, decided
// by the skill rules and recorded as a read of the skill's SKILL.md.
type skillGet struct {
	*exchange
	conn upstreamConn
	// uri is the server's own URI of SKILL.md; name the skill's namespaced name.
	uri, name string
}

func (b *Bridge) getSkill(rq *request) *jsonrpc.Message { return b.serve(rq, &skillGet{}) }

func (g *skillGet) resolve(b *Bridge, x *exchange) *jsonrpc.Message {
	g.exchange = x
	rq := x.rq
	var p struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(rq.msg.Params, &p); err != nil || p.URI == "" {
		return rpcError(rq, jsonrpc.CodeInvalidParams, "skills/get needs params with a uri", nil)
	}
	s, conn, uri, unknown := b.locateResource(rq, p.URI)
	if unknown != nil {
		return unknown
	}
	path, err := catalog.SkillPath(uri)
	if err != nil {
		return rpcError(rq, jsonrpc.CodeInvalidParams, err.Error(), nil)
	}
	x.server, g.conn, g.uri, g.name = s, conn, uri, catalog.SkillName(s.Name, path)
	x.resolvedAway = conn == nil
	x.method, x.target = methodRead, BridgeURI(s.Name, uri)
	x.action, x.what = "get the skill "+p.URI, "skill "+p.URI
	return nil
}

func (g *skillGet) decide(b *Bridge, x *exchange) (policy.Result, *jsonrpc.Message) {
	return b.engine.Load().DecideSkill(x.rq.id.Subject(), policy.SkillGet{Name: g.name, Server: g.server.Name, Namespace: g.server.Namespace}), nil
}

// describe sends skills/get: the skill's live entry, held to the published
// one before anything of it reaches the agent.
func (g *skillGet) describe(b *Bridge, x *exchange) (*upstreamCall, *jsonrpc.Message) {
	rq, s := x.rq, g.server
	conn := x.callConn(g.conn)
	var sk catalog.Skill
	return &upstreamCall{
		method: "skills/get", conn: conn,
		started: audit.ResourceRequested{Server: s.Name, URI: g.uri, ToolCallID: x.id, Credential: string(x.credKind)},
		send: func(ctx context.Context) (json.RawMessage, *jsonrpc.Message, error) {
			raw, live, err := b.liveSkill(ctx, rq, s, conn, g.uri)
			var ue *upstream.Error
			var rpcErr *jsonrpc.Error
			if errors.As(err, &ue) || errors.As(err, &rpcErr) {
				return nil, nil, err // failed upstream: the forward stage ends it as any call
			}
			if err != nil {
				return nil, b.skillRefused(x, err), err
			}
			sk = live
			return raw, nil, nil
		},
		// The entry is cleaned as a listing is (skillEntry).
		plain: true,
		output: func(raw json.RawMessage) (json.RawMessage, output.Summary, error) {
			out := rawjson.Set([]byte(`{"resultType":"complete"}`), "skill", b.skillEntry(rq, s, raw, sk))
			return withCacheHints(rq, out, newFreshness(), scopePrivate), output.Summary{}, nil
		},
		closing: func(raw json.RawMessage, _ output.Summary, _ time.Duration, _ error) (audit.Payload, string) {
			sum := sha256.Sum256(raw)
			return audit.ResourceFetched{Server: s.Name, URI: g.uri, SizeBytes: len(raw), ContentHash: "sha256:" + hex.EncodeToString(sum[:]), ToolCallID: x.id}, ""
		},
	}, nil
}

// liveSkill gets a skill's entry from its server and checks it is the
// published one.
func (b *Bridge) liveSkill(ctx context.Context, rq *request, s *routes.Server, conn upstreamConn, uri string) (json.RawMessage, catalog.Skill, error) {
	ctx, cancel := b.contextWithCallTimeout(ctx)
	defer cancel()
	params, _ := json.Marshal(map[string]string{"uri": uri})
	result, err := conn.CallFor(ctx, rq.upstreamAgent(), "skills/get", params)
	if err != nil {
		return nil, catalog.Skill{}, fmt.Errorf("skill %s of server %s: %w", uri, s.Name, err)
	}
	raw := rawjson.Get(result, "skill")
	sk, err := b.publishedSkill(s, raw)
	return raw, sk, err
}

// publishedSkill parses a live entry and checks it against status: a skill
// not published, or whose digest differs, is refused and logged.
func (b *Bridge) publishedSkill(s *routes.Server, raw json.RawMessage) (catalog.Skill, error) {
	sk, err := catalog.ParseSkill(s.Name, raw)
	if err != nil {
		return sk, fmt.Errorf("skill of server %s: %w", s.Name, err)
	}
	published, ok := s.Skills[sk.URI]
	switch {
	case !ok:
		err = fmt.Errorf("skill %s: not in the published catalog", sk.Name)
	case published.Digest != sk.Digest:
		err = fmt.Errorf("skill %s: live digest %s differs from the published %s", sk.Name, sk.Digest, published.Digest)
	default:
		return sk, nil
	}
	b.cfg.Log.Info("skill refused until the controller publishes it again (catalog pinning)", "server", s.Key(), "refused", err.Error())
	return sk, err
}

// skillEntry is a live entry in the caller's view: on /mcp every URI is
// the bridge's mcp://<server>/<uri>, so reads reach the right server. The
// frontmatter is the server's output, cleaned as a listing is (as SKILL.md
// itself is when read).
func (b *Bridge) skillEntry(rq *request, s *routes.Server, raw json.RawMessage, sk catalog.Skill) []byte {
	if clean, _, err := output.JSON(b.redactor(s), "skills", raw); err == nil {
		raw = clean
	}
	if rq.endpoint != "" {
		return raw
	}
	files := make([][]byte, 0, len(sk.Files))
	for _, f := range sk.Files {
		e := rawjson.Set([]byte(`{}`), "uri", rawjson.AppendString(nil, BridgeURI(s.Name, f.URI)))
		e = rawjson.Set(e, "digest", rawjson.AppendString(nil, f.Digest))
		files = append(files, rawjson.Set(e, "size", fmt.Appendf(nil, "%d", f.Size)))
	}
	out := rawjson.Set(raw, "uri", rawjson.AppendString(nil, BridgeURI(s.Name, sk.URI)))
	return rawjson.Set(out, "resources", rawjson.AppendArray(nil, files))
}

// skillOf is the published skill a resource URI (the server's own) is a
// file of, if any: the one whose directory holds it.
func skillOf(s *routes.Server, uri string) (v1alpha1.SkillStatus, bool) {
	for root, sk := range s.Skills {
		dir := strings.TrimSuffix(root, "SKILL.md")
		if uri == root || strings.HasPrefix(uri, dir) {
			return sk, true
		}
	}
	return v1alpha1.SkillStatus{}, false
}

// skillRefused ends x, whose skill entry or file is not the published one:
// the reason, redacted with the server's values (the error quotes what the
// server sent), goes to the agent and to the record.
func (b *Bridge) skillRefused(x *exchange, err error) *jsonrpc.Message {
	msg, _ := output.Text(b.redactor(x.server), "error.message", err.Error())
	b.cfg.Log.Info("skill refused", "server", x.server.Key(), "target", x.target, "error", msg)
	_, _ = b.audit(x.rq, x.failed(reasonSkillMismatch, msg))
	return rpcError(x.rq, CodeUpstream, msg, map[string]any{"reason": reasonSkillMismatch, "toolCallId": x.id})
}

// verifySkillFile checks a resources/read result of a skill file against
// the skill's live entry, itself checked against the published digest: the
// file must be listed, and its bytes must have the listed size and sha256.
func (b *Bridge) verifySkillFile(ctx context.Context, rq *request, s *routes.Server, conn upstreamConn, published v1alpha1.SkillStatus, uri string, result json.RawMessage) error {
	_, sk, err := b.liveSkill(ctx, rq, s, conn, published.URI)
	if err != nil {
		return err
	}
	want, ok := sk.File(uri)
	if !ok {
		return fmt.Errorf("skill %s does not list %s", sk.Name, uri)
	}
	var res struct {
		Contents []struct {
			Text *string `json:"text"`
			Blob *string `json:"blob"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(result, &res); err != nil || len(res.Contents) != 1 {
		return fmt.Errorf("skill file %s: the read did not return exactly one content", uri)
	}
	var data []byte
	switch c := res.Contents[0]; {
	case c.Text != nil:
		data = []byte(*c.Text)
	case c.Blob != nil:
		if data, err = base64.StdEncoding.DecodeString(*c.Blob); err != nil {
			return fmt.Errorf("skill file %s: blob is not base64", uri)
		}
	default:
		return fmt.Errorf("skill file %s: the read returned neither text nor blob", uri)
	}
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != want.Digest || int64(len(data)) != want.Size {
		return fmt.Errorf("skill file %s: %d bytes with digest %s, the skill lists %d bytes with %s", uri, len(data), got, want.Size, want.Digest)
	}
	return nil
}
