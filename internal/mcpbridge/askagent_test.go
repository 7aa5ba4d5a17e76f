package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
)

// Stage tests of the two ways the bridge asks an agent (askagent.go) and
// of the check every relayed request passes (passOn), with the real
// sealer, session and response stream.

// TestInputRequiredAnswer: the input_required answer carries the requests
// under their keys and the state sealed so that any replica opens it back
// to what was sealed; its bytes equal encoding/json's encoding of the same
// answer as a map (members in key order, HTML characters escaped).
func TestInputRequiredAnswer(t *testing.T) {
	sealer, err := signed.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	b := New(Config{Sealer: sealer})
	rq := &request{ctx: context.Background(), id: identity.Identity{Username: "alice"}, stateless: true, msg: &jsonrpc.Message{ID: json.RawMessage(`7`)}}
	x := &exchange{rq: rq, id: "call-1", method: methodCall, target: "mcp.s.t", args: json.RawMessage(`{"a":1}`)}
	st := newState(resumeApproval, x, b.now().Add(time.Minute))
	st.Answers = []string{answerAllowOnce, answerDeny}
	question := json.RawMessage(`{"message":"Allow <this> & that?","requestedSchema":{"type":"object"}}`)

	answer, err := b.inputRequired(rq, st, map[string]inputRequest{approvalKey: {Method: "elicitation/create", Params: question}})
	if err != nil || answer.Error != nil {
		t.Fatalf("inputRequired: %v, %+v", err, answer.Error)
	}
	var got struct {
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  string                  `json:"requestState"`
		ResultType    string                  `json:"resultType"`
	}
	if err := json.Unmarshal(answer.Result, &got); err != nil {
		t.Fatal(err)
	}
	if got.ResultType != "input_required" || got.InputRequests[approvalKey].Method != "elicitation/create" || len(got.InputRequests) != 1 {
		t.Fatalf("the answer is %s: want input_required asking elicitation/create under %q", answer.Result, approvalKey)
	}
	var opened requestState
	if err := sealer.Open(statePurpose, got.RequestState, &opened); err != nil || !reflect.DeepEqual(opened, st) {
		t.Fatalf("the sealed state opens to %+v (%v), want %+v", opened, err, st)
	}
	var form map[string]any
	_ = json.Unmarshal(question, &form)
	asMap, _ := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{approvalKey: map[string]any{"method": "elicitation/create", "params": form}},
		"requestState":  got.RequestState,
	})
	if string(answer.Result) != string(asMap) || string(answer.ID) != "7" {
		t.Fatalf("the answer's bytes changed:\n got %s\nwant %s", answer.Result, asMap)
	}
}

// TestAskInSession: a session-era agent gets the request on its response
// stream and its answer, posted back in the session, is what askInSession
// returns; a request that cannot be sent, or whose wait ends first, is
// told so and leaves nothing waiting in the session.
func TestAskInSession(t *testing.T) {
	sealer, _ := signed.New(testKey)
	sessions := session.NewManager(sealer, session.Options{IdleTimeout: time.Minute, MaxAge: time.Hour, MaxConcurrent: 2})
	sess, err := sessions.Open(session.Claims{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	id := json.RawMessage(`"relay-call-1-1"`)
	streamed := func() (*request, *httptest.ResponseRecorder) {
		w := httptest.NewRecorder()
		return &request{ctx: context.Background(), sess: sess, out: &responder{w: w, canStream: true}}, w
	}

	t.Run("answered", func(t *testing.T) {
		rq, w := streamed()
		asked := make(chan struct{})
		defer close(asked)
		go func() {
			// Delivered once askInSession waits for it (Await comes first);
			// given up when askInSession returns without waiting.
			for !sess.Deliver(&jsonrpc.Message{ID: id, Result: json.RawMessage(`{"action":"accept"}`)}) {
				select {
				case <-asked:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
		m, err := askInSession(context.Background(), rq, id, "elicitation/create", json.RawMessage(`{"message":"ok?"}`))
		if err != nil || string(m.Result) != `{"action":"accept"}` {
			t.Fatalf("askInSession = %+v, %v: want the agent's answer", m, err)
		}
		if body := w.Body.String(); !strings.Contains(body, `"method":"elicitation/create"`) || !strings.Contains(body, `"id":"relay-call-1-1"`) {
			t.Fatalf("the stream carried %q: want the request under its id", body)
		}
	})
	t.Run("not sent", func(t *testing.T) {
		rq, _ := streamed()
		rq.out.canStream = false
		if _, err := askInSession(context.Background(), rq, id, "elicitation/create", nil); !errors.Is(err, errNotSent) {
			t.Fatalf("askInSession without a stream = %v, want errNotSent", err)
		}
		if sess.Deliver(&jsonrpc.Message{ID: id}) {
			t.Fatal("a request that was not sent still waits in the session")
		}
	})
	t.Run("wait ended", func(t *testing.T) {
		rq, _ := streamed()
		why := errors.New("the call ended")
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(why)
		if _, err := askInSession(ctx, rq, id, "elicitation/create", nil); !errors.Is(err, why) {
			t.Fatalf("askInSession after its wait ended = %v, want %v", err, why)
		}
		if sess.Deliver(&jsonrpc.Message{ID: id}) {
			t.Fatal("a request whose wait ended still waits in the session")
		}
	})
}

// TestPassOn: every server's request passes one check, whichever way the
// agent is asked: a method that is not relayed, one the MCPServer does not
// allow, one the agent did not declare, an agent that cannot be asked now
// and text a rule withholds are each refused with their code and recorded
// so; one that passes goes to the agent marked with the server it comes
// from.
func TestPassOn(t *testing.T) {
	b := New(Config{})
	server := &routes.Server{Namespace: "tools", Name: "files", ServerRequests: v1alpha1.ServerRequests{Elicitation: v1alpha1.RelayAllowed}}
	c := &call{exchange: &exchange{rq: &request{elicitation: true, sampling: true}, id: "call-1"}, tool: &routes.Tool{Server: server, Upstream: "write"}}
	elicit := &jsonrpc.Message{Method: "elicitation/create", Params: json.RawMessage(`{"message":"Overwrite it?","requestedSchema":{"type":"object"}}`)}
	for _, tc := range []struct {
		name      string
		req       *jsonrpc.Message
		reachable bool
		code      int
		why       string
	}{
		{"not relayed", &jsonrpc.Message{Method: "roots/list"}, true, jsonrpc.CodeMethodNotFound, "roots/list is not relayed"},
		{"not allowed", &jsonrpc.Message{Method: "sampling/createMessage", Params: json.RawMessage(`{"messages":[]}`)}, true, jsonrpc.CodeMethodNotFound, "does not allow it"},
		{"not declared", &jsonrpc.Message{Method: "elicitation/create", Params: json.RawMessage(`{"mode":"url","url":"https://example.com"}`)}, true, jsonrpc.CodeMissingClientCapability, "did not declare"},
		{"not reachable", elicit, false, jsonrpc.CodeMissingClientCapability, "cannot be asked during a call"},
		{"injection blocked", &jsonrpc.Message{Method: "elicitation/create", Params: json.RawMessage(`{"message":"` + injected + `"}`)}, true, jsonrpc.CodeInvalidParams, reasonInjection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := audit.ServerRequest{}
			c.blockInjection = true
			defer func() { c.blockInjection = false }()
			params, refused := b.passOn(c, tc.req, tc.reachable, &ev)
			if refused == nil || params != nil {
				t.Fatalf("passOn passed %s", params)
			}
			if refused.Code != tc.code || !strings.Contains(refused.Message, tc.why) || ev.Outcome != relayRefused || ev.Reason != refused.Message {
				t.Fatalf("passOn refused with %d %q (event %q %q), want %d and %q, recorded", refused.Code, refused.Message, ev.Outcome, ev.Reason, tc.code, tc.why)
			}
		})
	}
	t.Run("passes", func(t *testing.T) {
		ev := audit.ServerRequest{}
		params, refused := b.passOn(c, elicit, true, &ev)
		if refused != nil || ev.Outcome != "" {
			t.Fatalf("passOn refused %+v (event %q)", refused, ev.Outcome)
		}
		if msg := string(params); !strings.Contains(msg, "files") || !strings.Contains(msg, "Overwrite it?") {
			t.Fatalf("the agent gets %s: want the message marked with the server", msg)
		}
	})
}
