package tracing

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

const (
	metaTP   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	headerTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

func TestExtract(t *testing.T) {
	cases := map[string]struct {
		header     http.Header
		params     string
		wantParent string // span id, "" for none
		wantState  string
	}{
		"_meta":                  {nil, `{"_meta":{"traceparent":"` + metaTP + `","tracestate":"a=1"}}`, "00f067aa0ba902b7", "a=1"},
		"header":                 {http.Header{"Traceparent": {headerTP}, "Tracestate": {"h=2"}}, `{"name":"x"}`, "b7ad6b7169203331", "h=2"},
		"_meta over the header":  {http.Header{"Traceparent": {headerTP}}, `{"_meta":{"traceparent":"` + metaTP + `"}}`, "00f067aa0ba902b7", ""},
		"bad _meta, the header":  {http.Header{"Traceparent": {headerTP}}, `{"_meta":{"traceparent":"00-zz-yy-01"}}`, "b7ad6b7169203331", ""},
		"_meta not a string":     {nil, `{"_meta":{"traceparent":7}}`, "", ""},
		"neither":                {nil, `{"arguments":{"traceparent":"` + metaTP + `"}}`, "", ""},
		"no params":              {nil, ``, "", ""},
		"all-zero trace refused": {nil, `{"_meta":{"traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}`, "", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			header := c.header
			if header == nil {
				header = http.Header{}
			}
			sc := trace.SpanContextFromContext(Extract(context.Background(), header, json.RawMessage(c.params)))
			if c.wantParent == "" {
				if sc.IsValid() {
					t.Fatalf("extracted %v, want nothing", sc)
				}
				return
			}
			if !sc.IsValid() || !sc.IsRemote() || sc.SpanID().String() != c.wantParent || sc.TraceState().String() != c.wantState {
				t.Fatalf("extracted %v (state %q), want span %s state %q", sc, sc.TraceState().String(), c.wantParent, c.wantState)
			}
		})
	}
}

func TestContextRoundTrip(t *testing.T) {
	if p, s := Context(context.Background()); p != "" || s != "" {
		t.Fatalf("context without a span gave %q %q", p, s)
	}
	ctx := Extract(context.Background(), http.Header{}, json.RawMessage(`{"_meta":{"traceparent":"`+metaTP+`","tracestate":"a=1"}}`))
	if p, s := Context(ctx); p != metaTP || s != "a=1" {
		t.Fatalf("got %q %q, want %q a=1", p, s, metaTP)
	}
}
