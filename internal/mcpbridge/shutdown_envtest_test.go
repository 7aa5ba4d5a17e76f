package mcpbridge

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// callWaitingForAPerson serves rt and makes a call of alice that waits for
// a person's decision on the ToolApproval a; done has its answer.
func callWaitingForAPerson(t *testing.T, rt *Runtime, k client.Client, ns string) (*bridgetest.Stateful, *http.Server, <-chan callResult, *v1alpha1.ToolApproval) {
	t.Helper()
	st := bridgetest.NewStateful(t, false)
	apply(t, k, bridgetest.Published(t, ns, "stateful", st.URL, v1alpha1.ToolsSpec{}))
	asking := toolPolicy(ns, "people-decide", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.stateful.remember"))
	asking.Spec.Approval = approveOnce(5*time.Minute, v1alpha1.ChannelToolApproval)
	createPolicy(t, k, asking)
	srv, url := serve(t, rt.Handler)
	c := connectTo(t, url, "alice-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge lists the asked tool", func() bool {
		return strings.Contains(strings.Join(listNames(t, c), ","), "mcp.stateful.remember")
	})
	done := callAsync(c, "mcp.stateful.remember", `{"value":"x"}`)
	a := waitingApproval(t, k, ns, "mcp.stateful.remember")
	return st, srv, done, a
}

// TestStopAnswersAWaitingApproval: a call waiting for a person's decision
// on a ToolApproval when its replica stops is answered at the start of the
// drain, -32011 bridge_stopping (not decided, to be sent again), and its
// ToolApproval is left Cancelled, saying the replica stopped, not Pending.
func TestStopAnswersAWaitingApproval(t *testing.T) {
	ns := freshNamespace("stopping")
	rt, _, k, sink := startRuntimeWith(t, func(o *Options) { o.ToolApprovals = true }, ns)
	st, srv, done, a := callWaitingForAPerson(t, rt, k, ns)

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
	if verdict, ok := retryable(r.err); !ok || !verdict {
		t.Errorf("the undecided call: %v, want retryable true (it never went upstream)", r.err)
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

// TestStopWaitsForASlowApprovalWrite: when the API server is slow to take
// the Cancelled status of a ToolApproval whose wait the stop ended, the
// request outlives the drain and its connection is closed under it, but
// Stop waits for it (within its bound) before it closes the audit stream:
// the call's audit chain still ends with tool.failed. The slow API server
// is made by delaying the broker's status writes (an interceptor): envtest
// cannot be made slow on demand.
func TestStopWaitsForASlowApprovalWrite(t *testing.T) {
	ns := freshNamespace("slowstop")
	rt, _, k, sink := startRuntimeWith(t, func(o *Options) { o.ToolApprovals = true }, ns)
	bounds := StopBounds{Delay: 50 * time.Millisecond, Drain: 300 * time.Millisecond, Sessions: 3 * time.Second, Flush: time.Second}
	// Later than the drain and its grace (srv.Shutdown gives up, and
	// srv.Close does not wait), within the sessions' phase.
	slow := bounds.Drain + stopAnswerGrace + time.Second
	broker := rt.Bridge.cfg.Approvals
	var stopping atomic.Bool
	broker.Client = interceptor.NewClient(noWatch{broker.Client}, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if stopping.Load() {
				select {
				case <-time.After(slow):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	_, srv, done, a := callWaitingForAPerson(t, rt, k, ns)
	// Only the Cancelled write is slow (the Pending one is written by now).
	testkit.Eventually(t, "the ToolApproval is Pending", func() bool {
		return k.Get(context.Background(), client.ObjectKeyFromObject(a), a) == nil && a.Status.Phase == v1alpha1.ApprovalPending
	})
	stopping.Store(true)

	start := time.Now()
	err := rt.Bridge.Stop(srv, rt.Registry, rt.Audit, nil, bounds)
	if took := time.Since(start); took > bounds.Total() {
		t.Errorf("Stop took %s, more than its bound %s", took, bounds.Total())
	}
	if err == nil || !strings.Contains(err.Error(), "while waiting for the last answers") {
		t.Errorf("Stop: %v, want the drain's deadline passed (the request outlived it)", err)
	}
	<-done
	id := a.Spec.Request.ToolCallID
	if types := typesOf(sinkEvents(t, sink), id); len(types) == 0 || types[len(types)-1] != "tool.failed" {
		t.Errorf("the call's audit chain %q, want it to end with tool.failed", types)
	}
	if err := k.Get(context.Background(), client.ObjectKeyFromObject(a), a); err != nil || a.Status.Phase != v1alpha1.ApprovalCancelled {
		t.Errorf("the ToolApproval after the stop: %s %v, want Cancelled", a.Status.Phase, err)
	}
}

// noWatch is a client.Client as interceptor.NewClient takes it; the broker
// never watches through its client.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("the broker's client does not watch")
}
