// Package canonjson writes JSON in one canonical form — object keys sorted by
// their bytes, no insignificant whitespace, strings re-escaped one way,
// numbers kept as written — so that digests of tool definitions and catalogs
// do not change with key order or formatting.
package canonjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Marshal returns the canonical form of one JSON value.
func Marshal(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("while canonicalizing JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("while canonicalizing JSON: more than one value")
	}
	var buf bytes.Buffer
	if err := write(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Digest is "sha256:" and the hex sha256 of the canonical form of data.
func Digest(data []byte) (string, error) {
	c, err := Marshal(data)
	if err != nil {
		return "", err
	}
	return SHA256(c), nil
}

// ArgumentsDigest is the digest of a request's arguments, in the one form
// that audit events (argumentsSha256) and ToolApprovals (argumentsSHA256)
// both record, so that a person can match one to the other: Digest, with
// no arguments (nil or null) counted as {}, how a call without arguments
// reaches the server.
func ArgumentsDigest(args []byte) (string, error) {
	if len(args) == 0 || string(args) == "null" {
		args = []byte(`{}`)
	}
	return Digest(args)
}

// SHA256 formats the digest of bytes already canonical.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func write(buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if v {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case json.Number:
		buf.WriteString(v.String())
	case string:
		writeString(buf, v)
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := write(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := write(buf, v[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("while canonicalizing JSON: unexpected %T", v)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode's newline
}
