package rawjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Check (this file) refuses JSON that different readers could read
// differently: an object with a key repeated, or with two keys that differ
// only in case. encoding/json (and the MCP libraries built on it) takes the
// last of repeated keys and matches struct fields case-insensitively, so
// {"name":"echo","NAME":"whoami"} can mean echo to the bridge's policy and
// whoami to the upstream server. The bridge checks every request from an
// agent with Check before it looks at it, so what it decides on is what the
// upstream runs.
//
// For the same reason Check refuses text that is not Unicode: invalid UTF-8
// bytes, and \u escapes naming a lone surrogate half. encoding/json (the
// policy, CEL, the approval digest) reads either as U+FFFD, while the
// upstream gets the raw bytes: an approval for "audit_copy\xff" would run
// "audit_copy\xfe". JSON text must be valid Unicode (RFC 8259 §8.1).

// MaxDepth is how deeply arrays and objects may nest.
const MaxDepth = 64

// ErrSyntax is wrapped by the error of a document that is not valid JSON.
var ErrSyntax = errors.New("not valid JSON")

// Check reports whether data is one valid JSON value with no repeated keys
// and no keys that differ only in case (Unicode simple case folding, the
// folding encoding/json's field matching uses), nested at most MaxDepth.
func Check(data []byte) error {
	if !json.Valid(data) {
		return ErrSyntax
	}
	if !utf8.Valid(data) {
		return fmt.Errorf("%w: the text is not valid UTF-8", ErrSyntax)
	}
	var keys [16]string // one allocation: the keys of most requests fit
	w := walker{data: data, keys: keys[:0]}
	_, err := w.value(skipSpace(data, 0), 0)
	return err
}

type walker struct {
	data []byte
	keys []string // scratch: the keys of the objects being walked, stacked
}

// value walks the value at i (valid JSON) and returns where it ends.
func (w *walker) value(i, depth int) (int, error) {
	switch w.data[i] {
	case '{':
		return w.object(i, depth+1)
	case '[':
		return w.array(i, depth+1)
	case '"':
		end, _ := skipString(w.data, i) // valid JSON (Check ran json.Valid): the string ends
		return end, checkEscapes(w.data[i:end])
	}
	for i < len(w.data) && !isDelimiter(w.data[i]) {
		i++
	}
	return i, nil
}

func (w *walker) array(i, depth int) (int, error) {
	if depth > MaxDepth {
		return 0, fmt.Errorf("nested deeper than %d", MaxDepth)
	}
	i = skipSpace(w.data, i+1)
	if w.data[i] == ']' {
		return i + 1, nil
	}
	for {
		end, err := w.value(i, depth)
		if err != nil {
			return 0, err
		}
		i = skipSpace(w.data, end)
		if w.data[i] == ']' {
			return i + 1, nil
		}
		i = skipSpace(w.data, i+1) // ','
	}
}

func (w *walker) object(i, depth int) (int, error) {
	if depth > MaxDepth {
		return 0, fmt.Errorf("nested deeper than %d", MaxDepth)
	}
	base := len(w.keys)
	defer func() { w.keys = w.keys[:base] }()
	var folded map[string]string // built only for large objects
	i = skipSpace(w.data, i+1)
	if w.data[i] == '}' {
		return i + 1, nil
	}
	for {
		// The document is valid JSON (Check ran json.Valid first): the
		// string ends and decodes.
		end, _ := skipString(w.data, i)
		if err := checkEscapes(w.data[i:end]); err != nil {
			return 0, err
		}
		key, _ := decodeKey(w.data[i:end])
		if folded != nil {
			f := foldKey(key)
			if prev, dup := folded[f]; dup {
				return 0, keyError(prev, key)
			}
			folded[f] = key
		} else {
			for _, prev := range w.keys[base:] {
				if strings.EqualFold(prev, key) {
					return 0, keyError(prev, key)
				}
			}
			w.keys = append(w.keys, key)
			if len(w.keys)-base > 16 {
				folded = make(map[string]string, 32)
				for _, k := range w.keys[base:] {
					folded[foldKey(k)] = k
				}
			}
		}
		i = skipSpace(w.data, end)
		i = skipSpace(w.data, i+1) // ':'
		end, err := w.value(i, depth)
		if err != nil {
			return 0, err
		}
		i = skipSpace(w.data, end)
		if w.data[i] == '}' {
			return i + 1, nil
		}
		i = skipSpace(w.data, i+1) // ','
	}
}

func keyError(prev, key string) error {
	if prev == key {
		return fmt.Errorf("key %q appears twice in one object", key)
	}
	return fmt.Errorf("keys %q and %q differ only in case: JSON keys are case-sensitive here", prev, key)
}

// foldKey maps every rune to the smallest rune of its simple case-folding
// orbit, so two keys fold to the same string exactly when EqualFold says
// they are equal.
func foldKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == utf8.RuneError {
			b.WriteRune(r)
			continue
		}
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// checkEscapes refuses a quoted string (valid JSON) whose \u escapes name
// a surrogate half that is not part of a pair.
func checkEscapes(q []byte) error {
	for j := 1; j < len(q)-1; j++ {
		if q[j] != '\\' {
			continue
		}
		j++
		if q[j] != 'u' {
			continue
		}
		r, _ := Hex4(q[j+1 : j+5])
		j += 4
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00: // a high half: a low one must follow
			if j+6 < len(q) && q[j+1] == '\\' && q[j+2] == 'u' {
				if low, _ := Hex4(q[j+3 : j+7]); low >= 0xdc00 && low <= 0xdfff {
					j += 6
					continue
				}
			}
			return fmt.Errorf("%w: a string holds the lone surrogate \\u%04x, which is not Unicode text", ErrSyntax, r)
		case utf16.IsSurrogate(r):
			return fmt.Errorf("%w: a string holds the lone surrogate \\u%04x, which is not Unicode text", ErrSyntax, r)
		}
	}
	return nil
}
