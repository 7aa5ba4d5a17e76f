// Package output is the bridge's output pipeline: what happens to a result
// between the upstream MCP server and the agent. For a tools/call result, in
// this order:
//
//  1. size cap: a result over MaxResultBytes is stored whole in the artifact
//     store; the agent gets the first PreviewBytes of its text and a
//     resource_link to artifact://<sha256>; the whole text is scanned, since
//     the agent can read it back;
//  2. invisible characters (Unicode tags, zero-width, bidi controls) removed
//     from every string, each removal a finding, the text hidden in tag
//     characters decoded and scanned; then secret redaction: credential
//     shapes and the server's own Secret values, in every string of the
//     result (text, structuredContent, embedded resources, _meta, keys);
//  3. injection scan of the text the model will read; findings go to the
//     audit event, and with Call.Block the result is withheld;
//  4. each text content item is prefixed "[mcp:<server>:<tool>] ", so the
//     model can tell which server said what; look-alike markers in every
//     string of the result are escaped (EscapeMarkers, right after
//     redaction), so none can be forged.
//
// The artifact holds the redacted result, never the raw one: a secret that
// must not reach the agent must not sit on a shared volume either, and the
// agent can read the artifact back. Redaction therefore runs on the whole
// result before it is stored; the cap is decided on the size the upstream
// returned.
//
// Results stay raw JSON throughout: members the pipeline does not know
// (structuredContent, _meta, vendor keys) pass through byte for byte, only
// rewritten where a secret was redacted. resources/read and prompts/get
// results go through the same stages (see ResourceResult and PromptResult).
package output

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/mcp/injection"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/redact"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// Defaults of Pipeline's limits.
const (
	DefaultMaxResultBytes    = 10 << 20
	DefaultPreviewBytes      = 8 << 10
	DefaultAuditPreviewBytes = 256
	// maxFindings bounds the findings of one result, which go into one
	// audit event.
	maxFindings = 32
)

// ErrBlocked is returned for a resource or prompt withheld because of an
// injection finding (a tool result is replaced by an error result instead).
var ErrBlocked = errors.New("withheld: the content looks like instructions to the model")

// Store keeps capped results; *artifact.Store is one.
type Store interface {
	Put(subject string, data []byte) (sha string, err error)
}

// Pipeline holds what stays the same from call to call. The zero value of a
// limit means its default. A Pipeline is safe for concurrent use.
type Pipeline struct {
	// Store receives results over MaxResultBytes. Without one, such results
	// are an error.
	Store Store
	// MaxResultBytes is the largest result passed on whole.
	MaxResultBytes int
	// PreviewBytes is how much text of a capped result the agent gets.
	PreviewBytes int
	// AuditPreviewBytes is the length of Summary.Preview.
	AuditPreviewBytes int
}

// Call says whose result this is.
type Call struct {
	// Server is the MCPServer's name.
	Server string
	// Name is the upstream tool name (tools/call), the prompt name
	// (prompts/get) or the resource URI (resources/read).
	Name string
	// Subject is the caller's identity; capped results are stored for it.
	Subject string
	// Redactor holds the Secret values the server was given; nil redacts the
	// credential shapes only.
	Redactor *redact.Redactor
	// Block withholds content with injection findings (policy says so).
	Block bool
}

// Summary is what the pipeline did, for the audit event.
type Summary struct {
	// SizeIn is the byte size of the result the upstream returned; SizeOut
	// that of the result the agent gets.
	SizeIn, SizeOut int
	// Redactions counts the secrets replaced, by kind.
	Redactions redact.Counts
	// Findings are the injection findings (at most 32).
	Findings []injection.Finding
	// Capped says the result was over the limit; Artifact is then the
	// sha256 of the stored (redacted) result.
	Capped   bool
	Artifact string
	// Blocked says the content was withheld because of Findings.
	Blocked bool
	// Preview is the start of the (redacted) text of the result, for
	// tool.completed's resultPreview.
	Preview string
}

func (p *Pipeline) maxResult() int { return orDefault(p.MaxResultBytes, DefaultMaxResultBytes) }
func (p *Pipeline) preview() int   { return orDefault(p.PreviewBytes, DefaultPreviewBytes) }
func (p *Pipeline) auditPreview() int {
	return orDefault(p.AuditPreviewBytes, DefaultAuditPreviewBytes)
}

func orDefault(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

// Prefix is what each text item of a tool result starts with.
func Prefix(server, tool string) string { return "[mcp:" + server + ":" + tool + "] " }

// ToolResult runs a tools/call result through the pipeline. raw is the
// JSON-RPC result object; the returned JSON replaces it. Malformed results
// (not JSON, not an object, content not an array of objects) are an error.
func (p *Pipeline) ToolResult(c Call, raw json.RawMessage) (json.RawMessage, Summary, error) {
	sum := Summary{SizeIn: len(raw)}
	res, err := p.redacted(c, raw, &sum)
	if err != nil {
		return nil, sum, fmt.Errorf("while processing the result of tool %s of server %s: %w", c.Name, c.Server, err)
	}
	var whole []injection.Finding
	if sum.Capped {
		// The agent can read the whole result back (artifact://), so its
		// whole text is scanned, not only the preview: a Block rule
		// withholds a capped result as it would a small one.
		scanned := sum.Findings
		scanStrings(&sum, "result", res.json)
		whole, sum.Findings = sum.Findings, scanned
		if c.Block && len(whole) > 0 {
			sum.Findings, sum.Blocked = whole, true
			out := blockedToolResult(Prefix(c.Server, c.Name), whole)
			sum.SizeOut = len(out)
			return out, sum, nil
		}
		if res.json, err = p.capTool(c, res, &sum); err != nil {
			return nil, sum, err
		}
		if res.members, err = rawjson.Members(res.json); err != nil {
			return nil, sum, err
		}
	}
	content := res.get("content")
	var items [][]byte
	if content != nil {
		if items, err = rawjson.Elements(content); err != nil {
			return nil, sum, fmt.Errorf("while processing the result of tool %s of server %s: content: %w", c.Name, c.Server, err)
		}
	}
	texts := make([]itemText, 0, len(items))
	for i, item := range items {
		t, err := readItem(item)
		if err != nil {
			return nil, sum, fmt.Errorf("while processing the result of tool %s of server %s: content[%d]: %w", c.Name, c.Server, i, err)
		}
		texts = append(texts, t)
	}
	var previewBuf strings.Builder
	for i, t := range texts {
		if t.text != "" || t.kind == "text" {
			where := "content[" + strconv.Itoa(i) + "]." + t.where
			sum.Findings = appendFindings(sum.Findings, where, t.text)
			appendPreview(&previewBuf, t.text, p.auditPreview())
		}
	}
	if sc := res.get("structuredContent"); sc != nil {
		scanStrings(&sum, "structuredContent", sc)
	}
	sum.Preview = textcut.Cut(previewBuf.String(), p.auditPreview())
	if sum.Capped {
		sum.Findings = whole // the preview's are among them
	}
	prefix := Prefix(c.Server, c.Name)
	if c.Block && len(sum.Findings) > 0 {
		sum.Blocked = true
		out := blockedToolResult(prefix, sum.Findings)
		sum.SizeOut = len(out)
		return out, sum, nil
	}
	// Prefix every text item; other items are copied as they are.
	changed := false
	for i, t := range texts {
		if t.kind != "text" {
			continue
		}
		// Its marker look-alikes were escaped with every string (redacted).
		items[i] = t.withText(prefix + t.text)
		changed = true
	}
	out := res.json
	if changed {
		out = res.replace("content", rawjson.AppendArray(make([]byte, 0, len(content)+len(texts)*len(prefix)+8), items))
	}
	sum.SizeOut = len(out)
	return out, sum, nil
}

// result is a redacted result object split into its members.
type result struct {
	json    []byte
	members []rawjson.Member
}

func (r result) get(key string) []byte {
	for _, m := range r.members {
		if m.Key == key {
			return m.Value
		}
	}
	return nil
}

// replace returns the object with key's value replaced (or added).
func (r result) replace(key string, value []byte) []byte {
	ms := make([]rawjson.Member, 0, len(r.members)+1)
	found := false
	for _, m := range r.members {
		if m.Key == key {
			m.Value, found = value, true
		}
		ms = append(ms, m)
	}
	if !found {
		ms = append(ms, rawjson.Member{Key: key, Value: value})
	}
	return rawjson.AppendObject(make([]byte, 0, len(r.json)+len(value)), ms)
}

// redacted checks raw, decides the cap on its size and redacts it.
func (p *Pipeline) redacted(c Call, raw []byte, sum *Summary) (result, error) {
	if !json.Valid(raw) {
		return result{}, errors.New("the result is not valid JSON")
	}
	members, err := rawjson.Members(raw)
	if err != nil {
		return result{}, fmt.Errorf("the result is not a JSON object: %w", err)
	}
	sum.Capped = len(raw) > p.maxResult()
	r := c.Redactor
	if r == nil {
		r = redact.Shapes()
	}
	clean, err := stripInvisible(raw, r, sum)
	if err != nil {
		return result{}, err
	}
	red, err := r.JSON(clean, &sum.Redactions)
	if err != nil {
		return result{}, err
	}
	// Marker look-alikes are escaped in every string, not only in text
	// items: a resource's text, a resource_link's name and a prompt's
	// messages are read by the model too.
	if red, err = EscapeMarkersJSON(red); err != nil {
		return result{}, err
	}
	if len(red) != len(raw) || &red[0] != &raw[0] {
		if members, err = rawjson.Members(red); err != nil {
			return result{}, err
		}
	}
	return result{json: red, members: members}, nil
}

// store puts a capped (redacted) result into the artifact store.
func (p *Pipeline) store(c Call, res result, sum *Summary) error {
	if p.Store == nil {
		return fmt.Errorf("the result of %s of server %s is %d bytes, over the limit of %d, and no artifact store is configured", c.Name, c.Server, sum.SizeIn, p.maxResult())
	}
	sha, err := p.Store.Put(c.Subject, res.json)
	if err != nil {
		return fmt.Errorf("while storing the capped result of %s of server %s: %w", c.Name, c.Server, err)
	}
	sum.Artifact = sha
	return nil
}

// capTool stores the whole result and returns the small one the agent gets:
// a text preview and a resource_link to the artifact; isError is kept.
func (p *Pipeline) capTool(c Call, res result, sum *Summary) ([]byte, error) {
	if err := p.store(c, res, sum); err != nil {
		return nil, err
	}
	preview := p.previewText(res.get("content"))
	note := fmt.Sprintf("\n\n[The result was %d bytes, over the bridge's limit of %d bytes: above is the start of its text. The whole result is the resource %s.]",
		sum.SizeIn, p.maxResult(), artifact.URI(sum.Artifact))
	out := []byte(`{"content":[{"type":"text","text":`)
	out = rawjson.AppendString(out, preview+note)
	out = append(out, `},{"type":"resource_link","uri":`...)
	out = rawjson.AppendString(out, artifact.URI(sum.Artifact))
	out = append(out, `,"name":`...)
	out = rawjson.AppendString(out, c.Name+"-result")
	out = append(out, `,"mimeType":"application/json","size":`...)
	out = strconv.AppendInt(out, int64(len(res.json)), 10)
	out = append(out, `}]`...)
	if isErr := res.get("isError"); isErr != nil && string(isErr) == "true" {
		out = append(out, `,"isError":true`...)
	}
	return append(out, '}'), nil
}

// previewText joins the text of the items of a content (or contents) array
// up to PreviewBytes, reading no further than it needs.
func (p *Pipeline) previewText(content []byte) string {
	if content == nil {
		return ""
	}
	items, err := rawjson.Elements(content)
	if err != nil {
		return ""
	}
	var sb strings.Builder
	for _, item := range items {
		if sb.Len() >= p.preview() {
			break
		}
		t, err := readItem(item)
		if err != nil || t.text == "" {
			continue
		}
		appendPreview(&sb, t.text, p.preview())
	}
	return textcut.Cut(sb.String(), p.preview())
}

func appendPreview(sb *strings.Builder, text string, limit int) {
	if sb.Len() >= limit+4 {
		return
	}
	if sb.Len() > 0 {
		sb.WriteByte('\n')
	}
	sb.WriteString(text[:min(len(text), limit+4)])
}

func blockedToolResult(prefix string, fs []injection.Finding) []byte {
	msg := prefix + "The bridge withheld this result: its text looks like instructions to the model (" + patternList(fs) + ")."
	out := []byte(`{"content":[{"type":"text","text":`)
	out = rawjson.AppendString(out, msg)
	return append(out, `}],"isError":true}`...)
}

// blockedError is ErrBlocked naming the patterns found, so the agent is told
// why.
func blockedError(fs []injection.Finding) error {
	return fmt.Errorf("%w (%s)", ErrBlocked, patternList(fs))
}

func patternList(fs []injection.Finding) string {
	var ids []string
	for _, f := range fs {
		if !contains(ids, f.Pattern) {
			ids = append(ids, f.Pattern)
		}
	}
	return strings.Join(ids, ", ")
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func appendFindings(fs []injection.Finding, where, text string) []injection.Finding {
	if len(fs) >= maxFindings || text == "" {
		return fs
	}
	found := injection.Scan(where, text)
	return append(fs, found[:min(len(found), maxFindings-len(fs))]...)
}

// scanStrings scans every string value of a JSON document.
func scanStrings(sum *Summary, where string, doc []byte) {
	_, _ = rawjson.RewriteStrings(doc, func(s, key string, isKey bool) (string, bool) {
		if !isKey {
			w := where
			if key != "" {
				w = where + "." + key
			}
			sum.Findings = appendFindings(sum.Findings, w, s)
		}
		return s, false
	})
}
