package canonjson

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// maxDepth is how deep arrays and objects may nest: encoding/json's limit,
// which the first canonical form inherited (one level more is an error).
const maxDepth = 10000

// Kinds of node.
const (
	kindLiteral byte = iota // a number, true, false or null: kept as written
	kindString
	kindArray
	kindObject
)

// node is one value of the text, in the order the text has them (an
// object's key, then its value, then the next key): the parse records
// where each value is once, so that writing an object's members in another
// order jumps over values instead of scanning them again.
type node struct {
	start, end int32 // the value's bytes, quotes and brackets included
	next       int32 // the node after this value and all it contains
	kind       byte
	// canonical: the value's bytes are already its canonical form (no
	// whitespace, strings escaped the one way, keys in order, no duplicate
	// keys), so they are written as they are.
	canonical bool
	// plain: a string without escapes, in valid UTF-8, without U+2028 or
	// U+2029: its decoded, raw and canonical forms are the same bytes.
	plain bool
}

// parser checks a JSON text as encoding/json's decoder does, and records
// its values as nodes.
type parser struct {
	data  []byte
	i     int
	depth int
	nodes []node
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("while canonicalizing JSON: "+format, args...)
}

func (p *parser) unexpected(want string) error {
	if p.i >= len(p.data) {
		return p.errorf("the text ends where %s should be", want)
	}
	return p.errorf("want %s, found %q at byte %d", want, p.data[p.i], p.i)
}

// parse reads the one value of the text, with only whitespace around it.
func (p *parser) parse() error {
	p.skipSpace()
	if p.i >= len(p.data) {
		return p.errorf("no value")
	}
	if _, err := p.value(); err != nil {
		return err
	}
	p.skipSpace()
	if p.i < len(p.data) {
		return p.errorf("more than one value (%q at byte %d)", p.data[p.i], p.i)
	}
	return nil
}

// skipSpace skips JSON whitespace and says whether there was any.
func (p *parser) skipSpace() bool {
	start := p.i
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
			continue
		}
		break
	}
	return p.i > start
}

// value reads the value at p.i and says whether it is canonical.
func (p *parser) value() (bool, error) {
	if p.i >= len(p.data) {
		return false, p.unexpected("a value")
	}
	idx := len(p.nodes)
	p.nodes = append(p.nodes, node{start: int32(p.i)})
	n := node{start: int32(p.i), canonical: true}
	var err error
	switch c := p.data[p.i]; {
	case c == '"':
		n.kind = kindString
		n.plain, n.canonical, err = p.string()
	case c == '{':
		n.kind = kindObject
		n.canonical, err = p.object()
	case c == '[':
		n.kind = kindArray
		n.canonical, err = p.array()
	case c == '-' || c >= '0' && c <= '9':
		n.kind = kindLiteral
		err = p.number()
	default:
		n.kind = kindLiteral
		err = p.literal()
	}
	if err != nil {
		return false, err
	}
	n.end, n.next = int32(p.i), int32(len(p.nodes))
	p.nodes[idx] = n
	return n.canonical, nil
}

func (p *parser) literal() error {
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(p.data[p.i:], []byte(lit)) {
			p.i += len(lit)
			return nil
		}
	}
	return p.unexpected("a value")
}

// number reads a number as JSON spells it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) number() error {
	if p.data[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '0':
		p.i++
	case p.digits() == 0:
		return p.unexpected("a digit")
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return p.unexpected("a digit after the decimal point")
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return p.unexpected("a digit of the exponent")
		}
	}
	return nil
}

func (p *parser) digits() int {
	start := p.i
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// string reads a string and says whether it is plain and whether it is
// canonical (plain, or escaped only as canonical strings are).
func (p *parser) string() (plain, canonical bool, err error) {
	plain, canonical = true, true
	p.i++ // the opening quote
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return plain, canonical, nil
		case c < 0x20:
			return false, false, p.errorf("a control character (%q) in a string at byte %d", c, p.i)
		case c == '\\':
			plain = false
			n, canon, err := p.escape()
			if err != nil {
				return false, false, err
			}
			canonical = canonical && canon
			p.i += n
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				plain, canonical = false, false // written as U+FFFD, \u2028, \u2029
			}
			p.i += size
		}
	}
	return false, false, p.unexpected("the end of a string")
}

// escape checks the escape at p.i, says how long it is and whether it is
// the one a canonical string has for its character.
func (p *parser) escape() (int, bool, error) {
	if p.i+1 >= len(p.data) {
		return 0, false, p.unexpected("an escape")
	}
	switch p.data[p.i+1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2, true, nil
	case '/':
		return 2, false, nil // "/" is written as it is
	case 'u':
		r, ok := rawjson.Hex4(p.data[p.i+2:])
		if !ok {
			return 0, false, p.errorf("a malformed \\u escape at byte %d", p.i)
		}
		var canon [6]byte
		return 6, bytes.Equal(p.data[p.i:p.i+6], appendRune(canon[:0], r)), nil
	default:
		return 0, false, p.errorf("the escape \\%c at byte %d", p.data[p.i+1], p.i)
	}
}

// open enters the array or object at p.i and says whether it is empty and
// whether no whitespace follows its bracket.
func (p *parser) open(closing byte) (empty, tight bool, err error) {
	p.depth++
	if p.depth > maxDepth {
		return false, false, p.errorf("arrays and objects nested deeper than %d", maxDepth)
	}
	p.i++
	tight = !p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == closing {
		p.i++
		p.depth--
		return true, tight, nil
	}
	return false, tight, nil
}

// next reads what follows an element or member: a comma (more follow) or
// the closing bracket, and says whether there was no whitespace.
func (p *parser) next(closing byte) (more, tight bool, err error) {
	tight = !p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == ',' {
		p.i++
		return true, !p.skipSpace() && tight, nil
	}
	if p.i < len(p.data) && p.data[p.i] == closing {
		p.i++
		p.depth--
		return false, tight, nil
	}
	return false, false, p.unexpected(fmt.Sprintf("',' or '%c'", closing))
}

func (p *parser) array() (bool, error) {
	empty, canonical, err := p.open(']')
	if err != nil || empty {
		return canonical, err
	}
	for more := true; more; {
		canon, err := p.value()
		if err != nil {
			return false, err
		}
		var tight bool
		if more, tight, err = p.next(']'); err != nil {
			return false, err
		}
		canonical = canonical && canon && tight
	}
	return canonical, nil
}

func (p *parser) object() (bool, error) {
	empty, canonical, err := p.open('}')
	if err != nil || empty {
		return canonical, err
	}
	var prevKey []byte
	for more := true; more; {
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return false, p.unexpected("a key")
		}
		keyStart := p.i
		if _, err := p.value(); err != nil {
			return false, err
		}
		// Keys in strictly increasing order are sorted and unique; a key
		// that is not plain is decoded to be sorted, which the writer does.
		key := p.data[keyStart+1 : p.i-1]
		canonical = canonical && p.nodes[len(p.nodes)-1].plain && (prevKey == nil || bytes.Compare(prevKey, key) < 0)
		prevKey = key
		canonical = !p.skipSpace() && canonical
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return false, p.unexpected("':' after a key")
		}
		p.i++
		canonical = !p.skipSpace() && canonical
		canon, err := p.value()
		if err != nil {
			return false, err
		}
		var tight bool
		if more, tight, err = p.next('}'); err != nil {
			return false, err
		}
		canonical = canonical && canon && tight
	}
	return canonical, nil
}
