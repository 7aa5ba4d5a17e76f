package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Bounds of the arguments' preview: arguments over the preview size are
// shown by their structure, with every value cut, rather than by a prefix
// of their text. A prefix can be padded ({"pad":"xxx…","path":"/etc"}) so
// that what the call really does never shows; the structure shows each
// key, so a padded argument only gets its own value cut.
const (
	previewString     = 32 // bytes of a string value or key shown
	previewKeys       = 16 // keys of a top-level object shown with values
	previewKeyNames   = 64 // keys of a top-level object named at all
	previewNestedKeys = 4  // keys of a nested object shown with values
	previewItems      = 3  // items of an array shown
	previewDepth      = 3  // deeper objects and arrays show their size only
)

// structurePreview writes the preview of valid JSON data, which is larger
// than the preview size.
func structurePreview(data []byte) string {
	if !json.Valid(data) {
		return "(arguments of " + strconv.Itoa(len(data)) + " bytes that are not valid JSON)"
	}
	return string(previewValue(nil, data, 1)) + " (" + strconv.Itoa(len(data)) + " bytes)"
}

// previewValue appends the preview of the JSON value raw at depth.
func previewValue(b, raw []byte, depth int) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return b
	}
	switch raw[0] {
	case '{':
		members, err := rawjson.Members(raw)
		if err != nil {
			return append(b, "{…}"...)
		}
		if depth > previewDepth {
			return append(b, "{…"+strconv.Itoa(len(members))+" keys}"...)
		}
		shown, named := previewNestedKeys, previewNestedKeys
		if depth == 1 {
			shown, named = previewKeys, previewKeyNames
		}
		b = append(b, '{')
		for i, m := range members {
			if i == named {
				b = append(b, ",… +"+strconv.Itoa(len(members)-named)+" keys"...)
				break
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = rawjson.AppendString(b, cutString(m.Key))
			b = append(b, ':')
			if i < shown {
				b = previewValue(b, m.Value, depth+1)
			} else {
				b = append(b, "…"...)
			}
		}
		return append(b, '}')
	case '[':
		items, err := rawjson.Elements(raw)
		if err != nil {
			return append(b, "[…]"...)
		}
		if depth > previewDepth {
			return append(b, "[…"+strconv.Itoa(len(items))+" items]"...)
		}
		b = append(b, '[')
		for i, it := range items {
			if i == previewItems {
				b = append(b, ",… +"+strconv.Itoa(len(items)-previewItems)+" items"...)
				break
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = previewValue(b, it, depth+1)
		}
		return append(b, ']')
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return append(b, "\"…\""...)
		}
		b = rawjson.AppendString(b, cutString(s))
		if len(s) > previewString {
			b = append(b, "("+strconv.Itoa(len(s))+" bytes)"...)
		}
		return b
	}
	if len(raw) > previewString {
		return append(append(b, raw[:previewString]...), "…"...)
	}
	return append(b, raw...)
}

// cutString keeps the first previewString bytes of s (whole runes), marked
// with … when cut.
func cutString(s string) string {
	if len(s) <= previewString {
		return s
	}
	n := previewString
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
