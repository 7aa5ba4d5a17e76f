package output

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// ResourceResult runs a resources/read result ({"contents":[…]}) through
// the pipeline: the same cap (the agent gets one text entry with the preview
// and the artifact URI: resources/read has no resource_link), redaction and
// injection scan (blocking returns ErrBlocked). No prefix: contents are data
// (a file, a JSON document) that a prefix would corrupt, and their URIs
// already name the server.
//
// Reads of artifact:// URIs must not come here: an artifact is redacted
// already, and capping it again would make it unreadable.
func (p *Pipeline) ResourceResult(c Call, raw json.RawMessage) (json.RawMessage, Summary, error) {
	sum := Summary{SizeIn: len(raw)}
	fail := func(err error) (json.RawMessage, Summary, error) {
		return nil, sum, fmt.Errorf("while processing resource %s of server %s: %w", c.Name, c.Server, err)
	}
	res, err := p.redacted(c, raw, &sum)
	if err != nil {
		return fail(err)
	}
	if sum.Capped {
		// The whole contents are scanned (the agent can read them back),
		// not only the preview.
		scanStrings(&sum, "contents", res.get("contents"))
		if err := p.store(c, res, &sum); err != nil {
			return nil, sum, err
		}
		text := p.previewText(res.get("contents")) + fmt.Sprintf(
			"\n\n[The contents were %d bytes, over the bridge's limit of %d bytes: above is the start of their text. The whole contents are the resource %s.]",
			sum.SizeIn, p.maxResult(), artifact.URI(sum.Artifact))
		out := []byte(`{"contents":[{"uri":`)
		out = rawjson.AppendString(out, c.Name)
		out = append(out, `,"mimeType":"text/plain","text":`...)
		out = rawjson.AppendString(out, text)
		res.json = append(out, `}]}`...)
		if res.members, err = rawjson.Members(res.json); err != nil {
			return fail(err)
		}
	}
	if contents := res.get("contents"); contents != nil {
		items, err := rawjson.Elements(contents)
		if err != nil {
			return fail(fmt.Errorf("contents: %w", err))
		}
		var preview strings.Builder
		for i, item := range items {
			t, err := readItem(item)
			if err != nil {
				return fail(fmt.Errorf("contents[%d]: %w", i, err))
			}
			if !sum.Capped {
				sum.Findings = appendFindings(sum.Findings, "contents["+strconv.Itoa(i)+"].text", t.text)
			}
			appendPreview(&preview, t.text, p.auditPreview())
		}
		sum.Preview = textcut.Cut(preview.String(), p.auditPreview())
	}
	if c.Block && len(sum.Findings) > 0 {
		sum.Blocked = true
		return nil, sum, blockedError(sum.Findings)
	}
	sum.SizeOut = len(res.json)
	return res.json, sum, nil
}
