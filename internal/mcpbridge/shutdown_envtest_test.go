package mcpbridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
)

// TestStopAnswersAWaitingApproval: a call waiting for a person's decision
// on a ToolApproval when its replica stops is answered at the start of the
// drain, -32011 bridge_stopping (not decided, to be sent again), and its
// ToolApproval is left Cancelled, saying the replica stopped, not Pending.
func TestStopAnswersAWaitingApproval(t *testing.T) {
	ns := freshNamespace("stopping")
	rt, _, k, sink := startRuntimeWith(t, func(o *Options) { o.ToolApprovals = true }, ns)
	st := bridgetest.NewStateful(t, false)
	apply(t, k, bridgetest.Published(t, ns, "stateful", st.URL, v1alpha1.ToolsSpec{}))
	asking := toolPolicy(ns, "people-decide", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.stateful.remember"))
	asking.Spec.Approval = approveOnce(5*time.Minute, v1alpha1.ChannelToolApproval)
	createPolicy(t, k, asking)
	srv, url := serve(t, rt.Handler)
	c := connectTo(t, url, "alice-token", mcpclient.EraSession)
	eventually(t, "the bridge lists the asked tool", func() bool {
		return strings.Contains(strings.Join(listNames(t, c), ","), "mcp.stateful.remember")
	})
	done := callAsync(c, "mcp.stateful.remember", `{"value":"x"}`)
	a := waitingApproval(t, k, ns, "mcp.stateful.remember")

	bounds := StopBounds{Delay: 100 * time.Millisecond, Drain: 5 * time.Second, Sessions: time.Second, Flush: time.Second}
	start := time.Now()
	if err := rt.Bridge.Stop(srv, rt.Registry, rt.Audit, nil, bounds); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if took := time.Since(start); took > bounds.Delay+bounds.Drain/2 {
		t.Errorf("Stop took %s: the approval's wait must end at the start of the drain, not at its end", took)
	}
	r := <-done
	var rpcErr *jsonrpc.Error
	if !errors.As(r.err, &rpcErr) || rpcErr.Code != CodeUpstream || !strings.Contains(string(rpcErr.Data), `"reason":"bridge_stopping"`) ||
		!strings.Contains(rpcErr.Message, "not decided") {
		t.Errorf("the waiting call: %v, want -32011 bridge_stopping, not decided", r.err)
	}
	if len(st.Calls()) != 0 {
		t.Error("the undecided call reached its server")
	}
	if err := k.Get(context.Background(), client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	if a.Status.Phase != v1alpha1.ApprovalCancelled || !strings.Contains(a.Status.Message, "replica is stopping") {
		t.Errorf("the ToolApproval after the stop: %s %q, want Cancelled, saying the replica stopped", a.Status.Phase, a.Status.Message)
	}
	id := a.Spec.Request.ToolCallID
	if types := typesOf(sinkEvents(t, sink), id); len(types) == 0 || types[len(types)-1] != "tool.failed" {
		t.Errorf("the call's audit chain %q, want it to end with tool.failed", types)
	}
}
