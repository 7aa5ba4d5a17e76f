package catalog

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Argument is one top-level property of a tool's input schema: its name and
// what its schema says it holds (a path, a URL, or neither). ToolPolicy
// lints read them to tell a prefix test on a raw path from a harmless one,
// and a condition on an argument no tool has.
type Argument struct {
	Name  string                 `json:"name"`
	Holds v1alpha1.ArgumentHolds `json:"holds,omitempty"`
}

// Arguments lists the top-level properties of an input schema, sorted by
// name, and whether they are all the arguments the schema admits. A schema
// that is not an object with properties has none. It may admit others when
// it allows properties it does not list (additionalProperties or
// unevaluatedProperties other than false, patternProperties) or takes
// them from elsewhere (allOf, anyOf, oneOf, $ref, if, dependentSchemas):
// then "no tool takes X" cannot be said.
func Arguments(schema json.RawMessage) ([]Argument, bool) {
	var s struct {
		Properties            map[string]json.RawMessage `json:"properties"`
		AdditionalProperties  json.RawMessage            `json:"additionalProperties"`
		UnevaluatedProperties json.RawMessage            `json:"unevaluatedProperties"`
		PatternProperties     json.RawMessage            `json:"patternProperties"`
		AllOf                 json.RawMessage            `json:"allOf"`
		AnyOf                 json.RawMessage            `json:"anyOf"`
		OneOf                 json.RawMessage            `json:"oneOf"`
		Ref                   json.RawMessage            `json:"$ref"`
		If                    json.RawMessage            `json:"if"`
		DependentSchemas      json.RawMessage            `json:"dependentSchemas"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil, false
	}
	out := make([]Argument, 0, len(s.Properties))
	for name, prop := range s.Properties {
		out = append(out, Argument{Name: name, Holds: propertyHolds(name, prop)})
	}
	slices.SortFunc(out, func(a, b Argument) int { return strings.Compare(a.Name, b.Name) })
	closed := !admits(s.AdditionalProperties) && !admits(s.UnevaluatedProperties)
	for _, more := range []json.RawMessage{s.PatternProperties, s.AllOf, s.AnyOf, s.OneOf, s.Ref, s.If, s.DependentSchemas} {
		closed = closed && (len(more) == 0 || string(more) == "null")
	}
	return out, closed
}

// admits: a schema keyword that is set and not false lets properties in.
func admits(keyword json.RawMessage) bool {
	return len(keyword) > 0 && string(keyword) != "false" && string(keyword) != "null"
}

// propertyHolds reads what one property holds: only a string can be a path
// or a URL; its format says so most surely, then its name, then its
// description.
func propertyHolds(name string, prop json.RawMessage) v1alpha1.ArgumentHolds {
	var p struct {
		Type        json.RawMessage `json:"type"`
		Format      string          `json:"format"`
		Description string          `json:"description"`
	}
	if json.Unmarshal(prop, &p) != nil || !mayBeString(p.Type) {
		return ""
	}
	switch strings.ToLower(p.Format) {
	case "uri", "uri-reference", "iri", "iri-reference", "url", "uri-template":
		return v1alpha1.HoldsURL
	case "path", "file-path", "filepath", "directory", "dir-path":
		return v1alpha1.HoldsPath
	}
	if h := HoldsByName(name); h != "" {
		return h
	}
	return holdsByWords(words(p.Description), descriptionPathWords)
}

// mayBeString: the property's type is "string", a list holding "string",
// or not given (anything, strings included).
func mayBeString(t json.RawMessage) bool {
	if len(t) == 0 || string(t) == "null" {
		return true
	}
	var one string
	if json.Unmarshal(t, &one) == nil {
		return one == "string"
	}
	var many []string
	return json.Unmarshal(t, &many) == nil && slices.Contains(many, "string")
}

// Words in an argument's name that say what it holds. "file" counts in a
// name (file, source_file) but not in a description, where "the file's
// contents" says nothing about the argument.
var (
	namePathWords        = []string{"path", "paths", "file", "filename", "filepath", "dir", "dirname", "directory", "folder", "cwd"}
	descriptionPathWords = []string{"path", "paths", "directory", "folder"}
	urlWords             = []string{"url", "uri", "urls", "uris", "href", "endpoint"}
)

// HoldsByName is what an argument's name alone says it holds: a URL when a
// word of it is url, uri, href or endpoint (urlPath is part of a URL); a
// path when one is path, file, dir, directory, folder and the like; else
// nothing. Words are split at '_', '-', '.', digits and case changes
// (filePath, file_path, FILE-PATH).
func HoldsByName(name string) v1alpha1.ArgumentHolds {
	return holdsByWords(words(name), namePathWords)
}

func holdsByWords(ws []string, pathWords []string) v1alpha1.ArgumentHolds {
	holds := v1alpha1.ArgumentHolds("")
	for _, w := range ws {
		switch {
		case slices.Contains(urlWords, w):
			return v1alpha1.HoldsURL
		case slices.Contains(pathWords, w):
			holds = v1alpha1.HoldsPath
		}
	}
	return holds
}

// words splits s into lower-case words at anything not a letter and where
// a lower-case letter is followed by an upper-case one.
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	prevLower := false
	for _, r := range s {
		if !unicode.IsLetter(r) {
			flush()
			prevLower = false
			continue
		}
		if unicode.IsUpper(r) && prevLower {
			flush()
		}
		cur = append(cur, r)
		prevLower = unicode.IsLower(r)
	}
	flush()
	return out
}
