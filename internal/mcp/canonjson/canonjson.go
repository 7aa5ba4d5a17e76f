// Package canonjson writes JSON in one canonical form — object keys sorted by
// their bytes, no insignificant whitespace, strings re-escaped one way,
// numbers kept as written — so that digests of tool definitions and catalogs
// do not change with key order or formatting.
//
// The form is what decoding into Go values (numbers as json.Number) and
// encoding them with encoding/json (no HTML escaping) gave; the digests the
// project stores were made that way, so it must not change by a byte. It is
// computed in one parse of the text that records where each value is,
// then one write of the canonical form, straight into the hash for a
// digest; a text already in canonical form (checked by the parse) is
// hashed as it is.
package canonjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"math"
	"sync"
)

// state is the memory of one canonicalization, reused through a pool: a
// digest of small arguments then allocates only its result.
type state struct {
	p parser
	w writer
	h hash.Hash
}

var states = sync.Pool{New: func() any { return &state{h: sha256.New()} }}

// maxKept bounds the nodes and bytes a pooled state keeps between uses,
// so that one large text does not pin its memory.
const maxKept = 1 << 16

func getState(data []byte) *state {
	s := states.Get().(*state)
	s.p = parser{data: data, nodes: s.p.nodes[:0]}
	if len(data) > maxKept {
		// A large text's nodes in one allocation, not in a dozen growing
		// ones: an object's members are at most its colons, twice (key and
		// value), an array's elements its commas and one. Colons and commas
		// inside strings count too, so the reservation is capped at a node
		// per 8 bytes of text, twice the text's size (a text of colons in
		// one string reserved 32 times its size); a text with more values
		// than that grows the slice as it goes.
		s.p.nodes = make([]node, 0, min(2*bytes.Count(data, []byte(":"))+bytes.Count(data, []byte(","))+16, len(data)/8+16))
	}
	return s
}

func putState(s *state) {
	if cap(s.p.nodes) > maxKept {
		s.p.nodes = nil
	}
	if cap(s.w.out) > maxKept {
		s.w.out = nil
	}
	// The members' keys point into the text: a pooled state must not keep
	// it alive (writer.object clears what it used, so this costs nothing
	// per digest however large an earlier text was).
	if cap(s.w.members) > maxKept {
		s.w.members = nil
	}
	s.p.data, s.w.data, s.w.nodes = nil, nil, nil
	states.Put(s)
}

// canonicalize parses data and writes its canonical form: into h when h
// is set (then it returns nil), else into the returned bytes; data itself
// (without the whitespace around it) when it is canonical already.
func (s *state) canonicalize(h hash.Hash) ([]byte, error) {
	if len(s.p.data) > math.MaxInt32 {
		return nil, s.p.errorf("the text is larger than 2 GiB")
	}
	if err := s.p.parse(); err != nil {
		return nil, err
	}
	root := s.p.nodes[0]
	if root.canonical {
		return s.p.data[root.start:root.end], nil
	}
	s.w = writer{data: s.p.data, nodes: s.p.nodes, out: s.w.out[:0], h: h, members: s.w.members[:0]}
	s.w.value(0)
	if h != nil {
		s.w.flush()
		return nil, nil
	}
	return s.w.out, nil
}

// Marshal returns the canonical form of one JSON value.
func Marshal(data []byte) ([]byte, error) {
	s := getState(data)
	defer putState(s)
	if cap(s.w.out) < len(data) {
		s.w.out = make([]byte, 0, len(data)) // about the canonical form's size
	}
	c, err := s.canonicalize(nil)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), c...), nil
}

// Digest is "sha256:" and the hex sha256 of the canonical form of data.
func Digest(data []byte) (string, error) {
	s := getState(data)
	defer putState(s)
	s.h.Reset()
	c, err := s.canonicalize(s.h)
	if err != nil {
		return "", err
	}
	if c != nil { // canonical as it stands
		return SHA256(c), nil
	}
	var sum [sha256.Size]byte
	return format(s.h.Sum(sum[:0])), nil
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
	return format(sum[:])
}

func format(sum []byte) string {
	var b [len("sha256:") + 2*sha256.Size]byte
	n := copy(b[:], "sha256:")
	hex.Encode(b[n:], sum)
	return string(b[:])
}
