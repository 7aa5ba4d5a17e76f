// Package tokencorpus is the bare-token corpus's format: fake credentials of
// vendors' published formats, each wrapped as a server may print it (bare,
// in a JSON document, in an env file, in a URL's query) with names that say
// nothing. hack/tokencorpus writes internal/redact/testdata/bare-tokens.json
// with Wrap; the tests and make bench-redact read it with Load and look for
// each token as Rendered says its wrapping writes it.
package tokencorpus

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Entry is one token of the corpus and its wrappings, by name.
type Entry struct {
	Kind    string            `json:"kind"`
	Token   string            `json:"token"`
	Wrapped map[string]string `json:"wrapped"`
}

// Wrappings are the names of the ways a token is wrapped.
var Wrappings = []string{"bare", "json", "env", "url"}

// Wrap renders token in every wrapping; n numbers it in the texts around.
func Wrap(token string, n int) map[string]string {
	doc, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("item-%d", n), "value": token, "enabled": true})
	env := token
	if strings.ContainsAny(env, " \n") {
		env = `"` + env + `"`
	}
	return map[string]string{
		"bare": token,
		"json": string(doc),
		"env":  fmt.Sprintf("LOG_LEVEL=info\nITEM_%d=%s\nPORT=8080\n", n, env),
		"url":  fmt.Sprintf("https://api.example.com/v1/items?ref=%s&page=2", url.QueryEscape(token)),
	}
}

// Rendered is token as wrapping writes it: escaped in JSON, query-escaped
// in a URL, as it is otherwise.
func Rendered(token, wrapping string) string {
	switch wrapping {
	case "json":
		b, _ := json.Marshal(token)
		return string(b[1 : len(b)-1])
	case "url":
		return url.QueryEscape(token)
	}
	return token
}

// Load reads a corpus file.
func Load(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c []Entry
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("while reading the token corpus %s: %w", path, err)
	}
	return c, nil
}
