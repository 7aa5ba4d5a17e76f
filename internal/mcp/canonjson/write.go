package canonjson

import (
	"bytes"
	"hash"
	"slices"
	"unicode/utf8"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// flushAt is how much canonical text a writer gathers before it hands it
// to its hash: sha256 is fastest on large writes.
const flushAt = 32 << 10

// writer writes the canonical form of a parsed text: into out, and from
// there into h when h is set (out then holds only what is not hashed yet).
type writer struct {
	data    []byte
	nodes   []node
	out     []byte
	h       hash.Hash
	members []member // the members of the objects being written, innermost last
}

// member is one member of an object being written: its decoded key (to
// sort by) and its key's node (the value's is the next).
type member struct {
	key  []byte
	node int32
}

func (w *writer) raw(b []byte) {
	if w.h != nil && len(b) >= flushAt {
		w.flush()
		w.h.Write(b)
		return
	}
	w.out = append(w.out, b...)
	w.maybeFlush()
}

func (w *writer) maybeFlush() {
	if w.h != nil && len(w.out) >= flushAt {
		w.flush()
	}
}

func (w *writer) flush() {
	w.h.Write(w.out)
	w.out = w.out[:0]
}

// value writes the value of node n.
func (w *writer) value(n int32) {
	nd := &w.nodes[n]
	if nd.canonical {
		w.raw(w.data[nd.start:nd.end])
		return
	}
	switch nd.kind {
	case kindString:
		w.string(w.data[nd.start+1 : nd.end-1])
	case kindArray:
		w.out = append(w.out, '[')
		for c := n + 1; c < nd.next; c = w.nodes[c].next {
			if c > n+1 {
				w.out = append(w.out, ',')
			}
			w.value(c)
		}
		w.out = append(w.out, ']')
	case kindObject:
		w.object(n)
	}
	w.maybeFlush()
}

// object writes an object's members sorted by the bytes of their decoded
// keys, and of members with the same key only the last: what decoding into
// a map and encoding the map did.
func (w *writer) object(n int32) {
	base := len(w.members)
	for c := n + 1; c < w.nodes[n].next; c = w.nodes[w.nodes[c].next].next {
		k := &w.nodes[c]
		key := w.data[k.start+1 : k.end-1]
		if !k.plain {
			key = appendDecoded(nil, key)
		}
		w.members = append(w.members, member{key: key, node: c})
	}
	ms := w.members[base:]
	if !slices.IsSortedFunc(ms, compareKeys) {
		slices.SortStableFunc(ms, compareKeys)
	}
	w.out = append(w.out, '{')
	first := true
	for i, m := range ms {
		if i+1 < len(ms) && bytes.Equal(ms[i+1].key, m.key) {
			continue // a later member has the same key: it wins
		}
		if !first {
			w.out = append(w.out, ',')
		}
		first = false
		w.value(m.node)
		w.out = append(w.out, ':')
		w.value(m.node + 1)
	}
	w.out = append(w.out, '}')
	clear(w.members[base:]) // their keys point into the text
	w.members = w.members[:base]
}

func compareKeys(a, b member) int { return bytes.Compare(a.key, b.key) }

// string writes the string whose raw (quoted, escaped) text is inner as
// encoding/json writes the decoded string without HTML escaping: invalid
// UTF-8 decodes to U+FFFD, which is then written as it is. Runs that need
// no escaping are copied as they are (a long one straight into the hash).
func (w *writer) string(inner []byte) {
	w.out = append(w.out, '"')
	for i := 0; i < len(inner); {
		start := i
		for i < len(inner) && inner[i] >= 0x20 && inner[i] < utf8.RuneSelf && inner[i] != '\\' && inner[i] != '"' {
			i++
		}
		w.raw(inner[start:i])
		if i == len(inner) {
			break
		}
		var r rune
		var size int
		if inner[i] == '\\' {
			r, size, _ = rawjson.DecodeEscape(inner[i:]) // checked by the parser
		} else {
			r, size = utf8.DecodeRune(inner[i:])
		}
		w.out = appendRune(w.out, r)
		i += size
	}
	w.out = append(w.out, '"')
}

// appendRune writes one character of a string's contents in canonical form.
func appendRune(dst []byte, r rune) []byte {
	switch r {
	case '"', '\\':
		return append(dst, '\\', byte(r))
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	case '\u2028', '\u2029':
		return append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
	}
	if r < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

const hexDigits = "0123456789abcdef"

// appendDecoded writes the decoded contents of a string's raw text.
func appendDecoded(dst, inner []byte) []byte {
	for i := 0; i < len(inner); {
		var r rune
		var size int
		switch c := inner[i]; {
		case c == '\\':
			r, size, _ = rawjson.DecodeEscape(inner[i:]) // checked by the parser
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
			continue
		default:
			r, size = utf8.DecodeRune(inner[i:])
		}
		dst = utf8.AppendRune(dst, r)
		i += size
	}
	return dst
}
