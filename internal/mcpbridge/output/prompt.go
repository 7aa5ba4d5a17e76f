package output

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// PromptResult runs a prompts/get result ({"description", "messages":[…]})
// through the pipeline: redaction, injection scan of each message's text
// (blocking returns ErrBlocked), and each message marked with
// "_meta": {"source": {"mcp": {"server", "prompt"}}} so the agent knows
// these messages came from a server, not from its user. An expansion over
// MaxResultBytes is an error: a prompt is not cut, and a link is no prompt.
func (p *Pipeline) PromptResult(c Call, raw json.RawMessage) (json.RawMessage, Summary, error) {
	sum := Summary{SizeIn: len(raw)}
	fail := func(err error) (json.RawMessage, Summary, error) {
		return nil, sum, fmt.Errorf("while processing prompt %s of server %s: %w", c.Name, c.Server, err)
	}
	res, err := p.redacted(c, raw, &sum)
	if err != nil {
		return fail(err)
	}
	if sum.Capped {
		return fail(fmt.Errorf("the expansion is %d bytes, over the limit of %d", sum.SizeIn, p.maxResult()))
	}
	messages := res.get("messages")
	if messages == nil {
		sum.SizeOut = len(res.json)
		return res.json, sum, nil
	}
	items, err := rawjson.Elements(messages)
	if err != nil {
		return fail(fmt.Errorf("messages: %w", err))
	}
	source := []byte(`{"mcp":{"server":`)
	source = rawjson.AppendString(source, c.Server)
	source = append(source, `,"prompt":`...)
	source = rawjson.AppendString(source, c.Name)
	source = append(source, `}}`...)
	var preview strings.Builder
	for i, msg := range items {
		ms, err := rawjson.Members(msg)
		if err != nil {
			return fail(fmt.Errorf("messages[%d]: not a JSON object", i))
		}
		if content := member(ms, "content"); content != nil {
			t, err := readItem(content)
			if err != nil {
				return fail(fmt.Errorf("messages[%d].content: %w", i, err))
			}
			sum.Findings = appendFindings(sum.Findings, "messages["+strconv.Itoa(i)+"].content."+t.where, t.text)
			appendPreview(&preview, t.text, p.auditPreview())
		}
		m := result{json: msg, members: ms}
		items[i] = m.replace("_meta", result{members: metaMembers(member(ms, "_meta"))}.replace("source", source))
	}
	sum.Preview = textcut.Cut(preview.String(), p.auditPreview())
	if c.Block && len(sum.Findings) > 0 {
		sum.Blocked = true
		return nil, sum, blockedError(sum.Findings)
	}
	out := res.replace("messages", rawjson.AppendArray(nil, items))
	sum.SizeOut = len(out)
	return out, sum, nil
}

// metaMembers are the members of an existing _meta object, kept when the
// source is added; anything else in its place is dropped.
func metaMembers(meta []byte) []rawjson.Member {
	if meta == nil {
		return nil
	}
	ms, err := rawjson.Members(meta)
	if err != nil {
		return nil
	}
	return ms
}
