package output

import (
	"errors"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// itemText is the text a model reads in one content item: a text item's
// text, an embedded resource's text, or the text of a resources/read
// contents entry (which has no type).
type itemText struct {
	kind    string // the item's "type"
	where   string // the text's path within the item
	text    string
	members []rawjson.Member
}

func readItem(item []byte) (itemText, error) {
	ms, err := rawjson.Members(item)
	if err != nil {
		return itemText{}, errors.New("not a JSON object")
	}
	t := itemText{members: ms}
	for _, m := range ms {
		if m.Key == "type" {
			t.kind, _ = rawjson.String(m.Value)
		}
	}
	switch t.kind {
	case "text", "":
		t.where = "text"
		t.text, _ = rawjson.String(member(ms, "text"))
	case "resource":
		t.where = "resource.text"
		t.text, _ = rawjson.String(rawjson.Get(member(ms, "resource"), "text"))
	}
	return t, nil
}

// withText is the item with its "text" member set to s.
func (t itemText) withText(s string) []byte {
	return result{members: t.members}.replace("text", rawjson.AppendString(nil, s))
}

func member(ms []rawjson.Member, key string) []byte {
	for _, m := range ms {
		if m.Key == key {
			return m.Value
		}
	}
	return nil
}
