package audit

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// Arguments over the preview size are shown by their structure within
// that many bytes, rather than by a prefix of their text, which can be
// padded so that what the call really does never shows
// ({"pad":"xxx…","path":"/etc"}). So that padding cannot push anything out
// of sight:
//
//   - the members of an object (items of an array) share the budget
//     fairly: a long one gets its share, not what the ones before it left;
//   - where there are more members than shares, the first and the last
//     ones are shown, and the count of those between;
//   - a long string shows both its ends ("xxxx…/etc/shadow"), with its size.
//
// The preview can still leave out what sits in the middle of long values
// or between many members: argumentsSha256 names the exact arguments.
const (
	// previewShare is the least a member or item is shown with; the budget
	// divided by it is how many are shown.
	previewShare = 24
	// previewDepth: deeper objects and arrays show their size only.
	previewDepth = 3
)

// structurePreview writes the preview of valid JSON data, which is larger
// than budget bytes.
func structurePreview(data []byte, budget int) string {
	if !json.Valid(data) {
		return "(arguments of " + strconv.Itoa(len(data)) + " bytes that are not valid JSON)"
	}
	return string(previewValue(nil, data, 1, max(budget, previewShare))) + " (" + strconv.Itoa(len(data)) + " bytes)"
}

// previewValue appends the preview of the JSON value raw at depth, in
// about budget bytes.
func previewValue(b, raw []byte, depth, budget int) []byte {
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
		return previewMembers(b, '{', '}', "keys", len(members), budget, func(b []byte, i, share int) []byte {
			start := len(b)
			b, _ = appendQuotedCut(b, members[i].Key, max(share/3, 8))
			// What the key took, as written (without its quotes); one
			// longer than its part of the share still leaves its value a
			// few bytes.
			took := len(b) - start - 2
			return previewValue(append(b, ':'), members[i].Value, depth+1, max(share-took, previewShare/3))
		})
	case '[':
		items, err := rawjson.Elements(raw)
		if err != nil {
			return append(b, "[…]"...)
		}
		if depth > previewDepth {
			return append(b, "[…"+strconv.Itoa(len(items))+" items]"...)
		}
		return previewMembers(b, '[', ']', "items", len(items), budget, func(b []byte, i, share int) []byte {
			return previewValue(b, items[i], depth+1, share)
		})
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return append(b, "\"…\""...)
		}
		return previewString(b, s, budget)
	}
	return append(b, textcut.BothEnds(string(raw), budget)...)
}

// previewMembers appends n members (or items) between opening and closing,
// each shown by member within a fair share of budget: all of them when
// the shares allow, else the first and the last with the count of those
// between.
func previewMembers(b []byte, opening, closing byte, noun string, n, budget int, member func(b []byte, i, share int) []byte) []byte {
	b = append(b, opening)
	if n == 0 {
		return append(b, closing)
	}
	shown := min(n, max(budget/previewShare, 1))
	share := budget / shown
	tail := shown / 2
	head := shown - tail
	for i := range n {
		if i >= head && i < n-tail {
			if i == head {
				b = append(b, ",… +"+strconv.Itoa(n-shown)+" "+noun...)
			}
			continue
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = member(b, i, share)
	}
	return append(b, closing)
}

// previewString appends s quoted, cut at both ends to about budget bytes,
// and its size when it was cut.
func previewString(b []byte, s string, budget int) []byte {
	b, cut := appendQuotedCut(b, s, budget)
	if cut {
		b = append(b, "("+strconv.Itoa(len(s))+" bytes)"...)
	}
	return b
}

// appendQuotedCut appends s quoted, cut at both ends so that its quoted
// form takes about budget bytes: a control character is escaped in six
// (\u0001), so the cut is measured on what is written. Strings and keys
// alike.
func appendQuotedCut(b []byte, s string, budget int) (_ []byte, cut bool) {
	// Cut first, then quote: a string of megabytes is never escaped whole.
	var quoted []byte
	n := budget
	for {
		quoted = rawjson.AppendString(quoted[:0], textcut.BothEnds(s, n))
		if len(quoted) <= budget+len("…")+2 || n == 1 {
			break
		}
		n = max(1, min(n-1, n*budget/len(quoted)))
	}
	return append(b, quoted...), len(s) > n
}
