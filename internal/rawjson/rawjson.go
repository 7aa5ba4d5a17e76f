// Package rawjson reads and rewrites JSON text in place, without decoding it
// into Go values: the bridge passes results through with their unknown fields,
// key order and number formatting intact and touches only what it must (a
// string here and there, a member added). Callers check the whole document
// once with json.Valid; the functions here still return errors, never panic,
// on text that is not valid JSON. Check (strict.go) is that check for what
// agents send, stricter than json.Valid. It is the one JSON scanner of the
// project: the bridge, its output pipeline, redaction and the audit writer
// use it.
package rawjson

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Member is one member of an object: its decoded key and its raw value.
type Member struct {
	Key   string
	Value []byte
	// Start is where Value starts in the object Members read (so a caller
	// can splice a new value in); not used by AppendObject.
	Start int
}

var errTruncated = errors.New("the JSON text ends too early")

// Members splits an object into its members, in order. Values are
// sub-slices of obj.
func Members(obj []byte) ([]Member, error) {
	out := make([]Member, 0, 8) // one allocation for the objects of MCP messages
	err := eachMember(obj, func(rawKey []byte, start, end int) error {
		key, err := decodeKey(rawKey)
		if err != nil {
			return err
		}
		out = append(out, Member{Key: key, Value: obj[start:end], Start: start})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachMember calls f with each member of an object, in order: its key as
// it stands in obj (quoted) and where its value starts and ends.
func eachMember(obj []byte, f func(rawKey []byte, start, end int) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return fmt.Errorf("while reading a JSON object: found %s", what(obj, i))
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return fmt.Errorf("while reading a JSON object: want a key, found %s", what(obj, i))
		}
		keyEnd, err := skipString(obj, i)
		if err != nil {
			return err
		}
		rawKey := obj[i:keyEnd]
		i = skipSpace(obj, keyEnd)
		if i >= len(obj) || obj[i] != ':' {
			return fmt.Errorf("while reading a JSON object: want ':' after key %s, found %s", rawKey, what(obj, i))
		}
		start := skipSpace(obj, i+1)
		end, err := SkipValue(obj, start)
		if err != nil {
			return err
		}
		if err := f(rawKey, start, end); err != nil {
			return err
		}
		i = skipSpace(obj, end)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
			continue
		}
		if i < len(obj) && obj[i] == '}' {
			return nil
		}
		return fmt.Errorf("while reading a JSON object: want ',' or '}', found %s", what(obj, i))
	}
}

// Elements splits an array into its raw elements, in order.
func Elements(arr []byte) ([][]byte, error) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return nil, fmt.Errorf("while reading a JSON array: found %s", what(arr, i))
	}
	var out [][]byte
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return out, nil
	}
	for {
		end, err := SkipValue(arr, i)
		if err != nil {
			return nil, err
		}
		out = append(out, arr[i:end])
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
			continue
		}
		if i < len(arr) && arr[i] == ']' {
			return out, nil
		}
		return nil, fmt.Errorf("while reading a JSON array: want ',' or ']', found %s", what(arr, i))
	}
}

// Get returns the raw value of key in obj, or nil when obj has no such key
// (or is not an object).
func Get(obj []byte, key string) []byte {
	if i := skipSpace(obj, 0); i >= len(obj) || obj[i] != '{' {
		return nil // not an object (often no value at all): no error to build
	}
	var found []byte
	err := eachMember(obj, func(rawKey []byte, start, end int) error {
		if found == nil && keyIs(rawKey, key) {
			found = obj[start:end]
		}
		return nil
	})
	if err != nil {
		return nil
	}
	return found
}

// keyIs says whether a quoted key decodes to key, without decoding (or
// allocating) when it has no escapes.
func keyIs(rawKey []byte, key string) bool {
	inner := rawKey[1 : len(rawKey)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == key
	}
	k, err := decodeString(rawKey)
	return err == nil && k == key
}

// String decodes v when it is a JSON string.
func String(v []byte) (string, bool) {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '"' {
		return "", false
	}
	end, err := skipString(v, i)
	if err != nil {
		return "", false
	}
	s, err := decodeString(v[i:end])
	return s, err == nil
}

// AppendObject writes an object of the members, in order.
func AppendObject(dst []byte, ms []Member) []byte {
	dst = append(dst, '{')
	for i, m := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, m.Key)
		dst = append(dst, ':')
		dst = append(dst, m.Value...)
	}
	return append(dst, '}')
}

// AppendArray writes an array of the raw elements, in order.
func AppendArray(dst []byte, elems [][]byte) []byte {
	dst = append(dst, '[')
	for i, e := range elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e...)
	}
	return append(dst, ']')
}

// AppendString writes s as a JSON string, escaped as encoding/json does
// (since Go 1.22: \b and \f short, other control characters as \u00XX)
// except that <, > and & stay as they are. Invalid UTF-8 becomes U+FFFD.
// No digest is taken over what it writes that must stay as it was: an
// argument's or a catalog's digest is over canonjson's own encoding, a
// resource's contentHash over the server's bytes; an artifact's name (the
// sha256 of its bytes) names it for its life only.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			switch r {
			case utf8.RuneError:
				dst = append(dst, `\ufffd`...)
			case '\u2028':
				dst = append(dst, `\u2028`...)
			default:
				dst = append(dst, `\u2029`...)
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hex = "0123456789abcdef"

// StringFunc rewrites one string of a document: s is the decoded string; key
// is the key it belongs to (the member's key for a value, "" inside arrays
// and at the top) and isKey says whether s is itself a key. It returns the
// replacement and whether it changed anything.
type StringFunc func(s, key string, isKey bool) (string, bool)

// RewriteStrings calls f on every string of the document (keys included)
// and returns the document with the changed strings re-encoded. All other
// bytes are copied as they are. When nothing changes, it returns doc itself.
func RewriteStrings(doc []byte, f StringFunc) ([]byte, error) {
	// One copy of the whole text makes every string without escapes a
	// substring of it, instead of one allocation each.
	text := string(doc)
	var out []byte // nil until the first change
	copied := 0    // doc[:copied] is in out already
	// keys[d] is the last key read at object depth d.
	var keyStack [16]string
	keys := keyStack[:0]
	inObject := make([]bool, 0, 16)
	for i := 0; i < len(doc); {
		switch b := doc[i]; b {
		case '{', '[':
			inObject = append(inObject, b == '{')
			keys = append(keys, "")
			i++
		case '}', ']':
			if len(inObject) == 0 {
				return nil, fmt.Errorf("while rewriting JSON strings: unbalanced %q at byte %d", b, i)
			}
			inObject = inObject[:len(inObject)-1]
			keys = keys[:len(keys)-1]
			i++
		case '"':
			end, err := skipString(doc, i)
			if err != nil {
				return nil, err
			}
			s := text[i+1 : end-1]
			if strings.IndexByte(s, '\\') >= 0 {
				if s, err = decodeString(doc[i:end]); err != nil {
					return nil, err
				}
			}
			j := skipSpace(doc, end)
			isKey := j < len(doc) && doc[j] == ':' && len(inObject) > 0 && inObject[len(inObject)-1]
			key := ""
			if len(keys) > 0 {
				key = keys[len(keys)-1]
			}
			if isKey {
				key = ""
			}
			if repl, changed := f(s, key, isKey); changed {
				if out == nil {
					out = make([]byte, 0, len(doc)+64)
				}
				out = append(out, doc[copied:i]...)
				out = AppendString(out, repl)
				copied = end
				s = repl
			}
			if isKey {
				keys[len(keys)-1] = s
			}
			i = end
		default:
			i++
		}
	}
	if out == nil {
		return doc, nil
	}
	return append(out, doc[copied:]...), nil
}

// SkipValue returns where the value starting at doc[i] ends.
func SkipValue(doc []byte, i int) (int, error) {
	if i >= len(doc) {
		return 0, errTruncated
	}
	switch doc[i] {
	case '"':
		return skipString(doc, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			switch doc[j] {
			case '"':
				end, err := skipString(doc, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errTruncated
	default: // number, true, false, null
		j := i
		for j < len(doc) && !isDelimiter(doc[j]) {
			j++
		}
		if j == i {
			return 0, fmt.Errorf("while reading JSON: want a value, found %s", what(doc, i))
		}
		return j, nil
	}
}

func isDelimiter(b byte) bool {
	return b == ',' || b == '}' || b == ']' || b == ':' || b == ' ' || b == '\t' || b == '\n' || b == '\r'
}

// skipString returns the end (one past the closing quote) of the string
// starting at doc[i] == '"'.
func skipString(doc []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(doc[j:], '"')
		if k < 0 {
			return 0, errTruncated
		}
		j += k
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		n := 0
		for p := j - 1; p > i && doc[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

// decodeKey is decodeString for object keys: the keys of JSON-RPC messages
// and MCP results come back as constants, without an allocation each.
func decodeKey(q []byte) (string, error) {
	switch string(q) {
	case `"jsonrpc"`:
		return "jsonrpc", nil
	case `"id"`:
		return "id", nil
	case `"method"`:
		return "method", nil
	case `"params"`:
		return "params", nil
	case `"result"`:
		return "result", nil
	case `"error"`:
		return "error", nil
	case `"name"`:
		return "name", nil
	case `"arguments"`:
		return "arguments", nil
	case `"progressToken"`:
		return "progressToken", nil
	case `"io.modelcontextprotocol/protocolVersion"`:
		return "io.modelcontextprotocol/protocolVersion", nil
	case `"io.modelcontextprotocol/clientCapabilities"`:
		return "io.modelcontextprotocol/clientCapabilities", nil
	case `"io.modelcontextprotocol/clientInfo"`:
		return "io.modelcontextprotocol/clientInfo", nil
	case `"io.modelcontextprotocol/serverInfo"`:
		return "io.modelcontextprotocol/serverInfo", nil
	case `"type"`:
		return "type", nil
	case `"text"`:
		return "text", nil
	case `"content"`:
		return "content", nil
	case `"contents"`:
		return "contents", nil
	case `"messages"`:
		return "messages", nil
	case `"resource"`:
		return "resource", nil
	case `"uri"`:
		return "uri", nil
	case `"mimeType"`:
		return "mimeType", nil
	case `"isError"`:
		return "isError", nil
	case `"structuredContent"`:
		return "structuredContent", nil
	case `"_meta"`:
		return "_meta", nil
	case `"annotations"`:
		return "annotations", nil
	case `"role"`:
		return "role", nil
	}
	return decodeString(q)
}

// decodeString decodes a quoted JSON string as encoding/json does (a lone
// UTF-16 surrogate becomes U+FFFD), except that invalid UTF-8 bytes are
// kept: they are re-encoded as U+FFFD only if the string is rewritten.
func decodeString(q []byte) (string, error) {
	inner := q[1 : len(q)-1]
	i := bytes.IndexByte(inner, '\\')
	if i < 0 {
		return string(inner), nil
	}
	buf := make([]byte, 0, len(inner))
	for i >= 0 {
		buf = append(buf, inner[:i]...)
		r, size, err := DecodeEscape(inner[i:])
		if err != nil {
			return "", fmt.Errorf("while decoding a JSON string: %w", err)
		}
		buf = utf8.AppendRune(buf, r)
		inner = inner[i+size:]
		i = bytes.IndexByte(inner, '\\')
	}
	buf = append(buf, inner...)
	return string(buf), nil
}

// DecodeEscape decodes the escape at the start of b (b[0] is its
// backslash) as encoding/json does: a UTF-16 surrogate pair is one
// character, a surrogate without its pair is U+FFFD. size is the bytes it
// took; an error for an escape JSON does not have.
func DecodeEscape(b []byte) (r rune, size int, err error) {
	if len(b) < 2 {
		return 0, 0, errors.New("a lone backslash at its end")
	}
	switch c := b[1]; c {
	case '"', '\\', '/':
		return rune(c), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		r, ok := Hex4(b[2:])
		if !ok {
			return 0, 0, errors.New("a malformed \\u escape")
		}
		if !utf16.IsSurrogate(r) {
			return r, 6, nil
		}
		if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if r2, ok := Hex4(b[8:]); ok {
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					return dec, 12, nil
				}
			}
		}
		return utf8.RuneError, 6, nil
	default:
		return 0, 0, fmt.Errorf("the escape \\%c", c)
	}
}

// Hex4 reads the four hex digits of a \u escape at the start of b.
func Hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// Blank says whether doc is empty or only JSON's white space.
func Blank(doc []byte) bool { return skipSpace(doc, 0) == len(doc) }

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

func what(doc []byte, i int) string {
	if i >= len(doc) {
		return "the end of the text"
	}
	return fmt.Sprintf("%q at byte %d", doc[i], i)
}

// Set returns obj with its member key set to value (replaced where it is,
// else added last); obj unchanged when it is not an object.
func Set(obj []byte, key string, value []byte) []byte {
	ms, err := Members(obj)
	if err != nil {
		return obj
	}
	found := false
	for i := range ms {
		if ms[i].Key == key {
			ms[i].Value, found = value, true
		}
	}
	if !found {
		ms = append(ms, Member{Key: key, Value: value})
	}
	return AppendObject(nil, ms)
}

// Remove returns obj without its member key; obj unchanged when it is not
// an object.
func Remove(obj []byte, key string) []byte {
	ms, err := Members(obj)
	if err != nil {
		return obj
	}
	kept := ms[:0]
	for _, m := range ms {
		if m.Key != key {
			kept = append(kept, m)
		}
	}
	return AppendObject(nil, kept)
}
