package translate

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out.json from the functions' outputs")

// translations run one case's input (testdata/<function>_<case>.in.json, an
// object of the function's arguments) through the function it names.
var translations = map[string]func(in map[string]json.RawMessage) ([]byte, error){
	"call-params": func(in map[string]json.RawMessage) ([]byte, error) {
		var name string
		if err := json.Unmarshal(in["name"], &name); err != nil {
			return nil, err
		}
		return CallParams(name, in["arguments"], in["params"]), nil
	},
	"strip-bridge-meta": func(in map[string]json.RawMessage) ([]byte, error) {
		return StripBridgeMeta(in["params"]), nil
	},
	"upstream-params": func(in map[string]json.RawMessage) ([]byte, error) {
		return UpstreamParams(in["params"]), nil
	},
	"set-meta": func(in map[string]json.RawMessage) ([]byte, error) {
		var key string
		if err := json.Unmarshal(in["key"], &key); err != nil {
			return nil, err
		}
		return SetMeta(in["params"], key, in["value"]), nil
	},
	"trace-context": func(in map[string]json.RawMessage) ([]byte, error) {
		var parent, state string
		if err := json.Unmarshal(in["traceparent"], &parent); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(in["tracestate"], &state); err != nil {
			return nil, err
		}
		return TraceContext(in["params"], parent, state), nil
	},
	"with-input-responses": func(in map[string]json.RawMessage) ([]byte, error) {
		var responses map[string]json.RawMessage
		var state string
		if err := json.Unmarshal(in["responses"], &responses); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(in["state"], &state); err != nil {
			return nil, err
		}
		return WithInputResponses(in["params"], responses, state), nil
	},
	"content-uris": func(in map[string]json.RawMessage) ([]byte, error) {
		var server string
		if err := json.Unmarshal(in["server"], &server); err != nil {
			return nil, err
		}
		return ContentURIs(in["result"], server), nil
	},
}

// TestTranslationsGolden: every case's output is exactly its .out.json, and
// every function has at least one case.
func TestTranslationsGolden(t *testing.T) {
	ins, err := filepath.Glob(filepath.Join("testdata", "*.in.json"))
	if err != nil || len(ins) == 0 {
		t.Fatalf("no cases in testdata: %v", err)
	}
	covered := map[string]bool{}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.json")
		fn, _, _ := strings.Cut(name, "_")
		t.Run(name, func(t *testing.T) {
			translate, ok := translations[fn]
			if !ok {
				t.Fatalf("%s names no function (want <function>_<case>, one of the keys of translations)", in)
			}
			covered[fn] = true
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var args map[string]json.RawMessage
			if err := json.Unmarshal(data, &args); err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			got, err := translate(args)
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			got = append(got, '\n')
			out := strings.TrimSuffix(in, ".in.json") + ".out.json"
			if *update {
				if err := os.WriteFile(out, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if string(got) != string(want) {
				t.Fatalf("%s:\n got %s\nwant %s", name, got, want)
			}
		})
	}
	for fn := range translations {
		if !covered[fn] {
			t.Errorf("%s has no case in testdata", fn)
		}
	}
}

// TestBridgeURIReverses: ParseBridgeURI undoes BridgeURI, and refuses what
// BridgeURI cannot have made.
func TestBridgeURIReverses(t *testing.T) {
	for _, uri := range []string{"file:///data/a.txt", "test://static/resource/1", "mcp://nested/x"} {
		server, got, ok := ParseBridgeURI(BridgeURI("fs", uri))
		if !ok || server != "fs" || got != uri {
			t.Errorf("%q: got %q %q %v", uri, server, got, ok)
		}
	}
	for _, bad := range []string{"file:///a", "mcp://", "mcp://fs", "mcp://fs/", "mcp:///x"} {
		if _, _, ok := ParseBridgeURI(bad); ok {
			t.Errorf("%q must not parse", bad)
		}
	}
}
