package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/mcp-operator/mcp-operator/internal/mcp/injection"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// fieldWriter appends the fields of an event, ",key":value each, redacting
// every string on the way. Hand-written appends instead of encoding/json:
// this runs several times per tool call, on the call path.
type fieldWriter struct {
	b             []byte
	r             *redact.Redactor
	argsMode      ArgsMode
	argsPreview   int
	compactBuffer bytes.Buffer
}

func (e *fieldWriter) key(k string) {
	e.b = append(e.b, ',', '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

func (e *fieldWriter) str(k, v string) {
	e.key(k)
	e.b = rawjson.AppendString(e.b, e.r.String(v, nil))
}

func (e *fieldWriter) strOmitEmpty(k, v string) {
	if v != "" {
		e.str(k, v)
	}
}

func (e *fieldWriter) strs(k string, vs []string) {
	e.key(k)
	if vs == nil {
		e.b = append(e.b, "null"...)
		return
	}
	e.b = append(e.b, '[')
	for i, v := range vs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = rawjson.AppendString(e.b, e.r.String(v, nil))
	}
	e.b = append(e.b, ']')
}

func (e *fieldWriter) int(k string, v int64) {
	e.key(k)
	e.b = strconv.AppendInt(e.b, v, 10)
}

func (e *fieldWriter) uint(k string, v uint64) {
	e.key(k)
	e.b = strconv.AppendUint(e.b, v, 10)
}

// float writes v as encoding/json does.
func (e *fieldWriter) float(k string, v float64) {
	e.key(k)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		e.b = append(e.b, '0') // encoding/json would fail; a duration is never so
		return
	}
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		out, _ := json.Marshal(v)
		e.b = append(e.b, out...)
		return
	}
	e.b = strconv.AppendFloat(e.b, v, 'f', -1, 64)
}

func (e *fieldWriter) boolOmitFalse(k string, v bool) {
	if v {
		e.key(k)
		e.b = append(e.b, "true"...)
	}
}

// counts writes a map with its keys sorted, as encoding/json does.
func (e *fieldWriter) counts(k string, m map[string]int) {
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	for name := range m {
		keys = append(keys, name)
	}
	slices.Sort(keys)
	e.key(k)
	e.b = append(e.b, '{')
	for i, name := range keys {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = rawjson.AppendString(e.b, name)
		e.b = append(e.b, ':')
		e.b = strconv.AppendInt(e.b, int64(m[name]), 10)
	}
	e.b = append(e.b, '}')
}

func (e *fieldWriter) findings(k string, fs []injection.Finding) {
	if len(fs) == 0 {
		return
	}
	e.key(k)
	e.b = append(e.b, '[')
	for i, f := range fs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = append(e.b, `{"pattern":`...)
		e.b = rawjson.AppendString(e.b, f.Pattern)
		e.b = append(e.b, `,"where":`...)
		e.b = rawjson.AppendString(e.b, e.r.String(f.Where, nil))
		e.b = append(e.b, `,"excerpt":`...)
		e.b = rawjson.AppendString(e.b, e.r.String(f.Excerpt, nil))
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ']')
}

// args writes arguments as ArgsMode says, redacted first so that a preview
// never shows part of a secret. No arguments, or ArgsNone: no field.
func (e *fieldWriter) args(args json.RawMessage) {
	if len(args) == 0 || e.argsMode == ArgsNone {
		return
	}
	e.key("args")
	e.compactBuffer.Reset()
	if err := json.Compact(&e.compactBuffer, args); err != nil {
		e.b = rawjson.AppendString(e.b, "(arguments of "+strconv.Itoa(len(args))+" bytes that are not valid JSON)")
		return
	}
	red, err := e.r.JSON(e.compactBuffer.Bytes(), nil)
	if err != nil {
		e.b = rawjson.AppendString(e.b, "(arguments of "+strconv.Itoa(len(args))+" bytes that could not be redacted)")
		return
	}
	if e.argsMode == ArgsFull {
		e.b = append(e.b, red...)
		return
	}
	text := string(red)
	if len(text) > e.argsPreview {
		text = structurePreview(red, e.argsPreview)
	}
	e.b = rawjson.AppendString(e.b, text)
	// A preview may leave out the middle of a long value: the digest names
	// the exact argument bytes the server was sent (to match against its
	// own logs, or arguments kept elsewhere).
	sum := sha256.Sum256(args)
	e.key("argumentsSha256")
	e.b = rawjson.AppendString(e.b, hex.EncodeToString(sum[:]))
}
