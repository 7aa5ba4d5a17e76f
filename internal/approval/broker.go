// Package approval puts a request that a ToolPolicy rule asks about to a
// person outside the agent: it creates a ToolApproval bound to the exact
// request, waits until someone decides it (seen through a watch, so a
// decision made anywhere reaches the replica holding the request), expires
// it, or cancels it when the agent goes away; it tells people through
// Kubernetes Events and an optional signed webhook. The Reaper removes
// finished approvals after a retention period.
//
// The package knows nothing of MCP or the bridge: the bridge hands it a
// Request and gets an Outcome.
package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/k8s/apiretry"
	"github.com/mcp-operator/mcp-operator/internal/mcp/canonjson"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// LabelServer names the MCPServer a ToolApproval's request goes to, for
// kubectl get -l.
const LabelServer = "mcp-operator.dev/server"

// Request is one request waiting for a person.
type Request struct {
	// Namespace is the MCPServer's, where the ToolApproval is created.
	Namespace string
	Server    string
	// Method is tools/call, resources/read or prompts/get; Target the
	// tool's or prompt's namespaced name or the resource's URI.
	Method, Target string
	// Args are the exact arguments (nil for a read): the approval binds
	// their digest, ArgsDigest (canonjson.ArgumentsDigest), computed from
	// Args when the caller has not computed it already.
	Args       json.RawMessage
	ArgsDigest string
	// ArgsPreview is what the person sees of them: redacted by the caller.
	ArgsPreview string
	Requester   v1alpha1.ApprovalRequester
	Risk        v1alpha1.Risk
	// Rules that asked, in sourcedFrom form, and their reason.
	Rules  []string
	Reason string
	// Modes a person may approve with.
	Modes []v1alpha1.ApprovalMode
	// ToolCallID links the approval to the call's audit events.
	ToolCallID string
	// Timeout is how long the request waits.
	Timeout time.Duration
	// Pending, when set, is called once the ToolApproval exists and the
	// request starts waiting (to tell the agent what it waits for).
	Pending func(namespace, name string, expires time.Time)
}

// Outcome is how a request's approval ended.
type Outcome struct {
	// Namespace and Name of the ToolApproval.
	Namespace, Name string
	// Phase is Approved, Denied, Expired or Cancelled.
	Phase v1alpha1.ApprovalPhase
	// Verdict, Decider and Comment are the person's decision (Approved or
	// Denied by a person).
	Verdict          v1alpha1.ApprovalVerdict
	Decider, Comment string
	// Message says what happened.
	Message string
}

// Ref is the ToolApproval as sourcedFrom names it: approval:<ns>/<name>.
func (o Outcome) Ref() string { return "approval:" + o.Namespace + "/" + o.Name }

// EventRecorder records Kubernetes Events (events.k8s.io): the recorders of
// client-go's tools/events and of controller-runtime's manager both are one.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Broker creates ToolApprovals and waits for their decisions. One Broker
// serves a bridge replica; Watch must run before Ask is called.
type Broker struct {
	// Client creates ToolApprovals and writes their status.
	Client client.Client
	// Recorder gets an Event for each step (nil: none).
	Recorder EventRecorder
	// Notifier is told of each pending approval and each outcome (nil:
	// nobody).
	Notifier Notifier
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log logr.Logger
	// WriteDeadline, when set and reporting true, is the time by which the
	// status writes made after a wait ended must be done (a stopping
	// replica's: its audit stream closes soon after); they get at most
	// afterWaitWrite anyway.
	WriteDeadline func() (time.Time, bool)
	// APITimeout bounds each call to the API server made for a request
	// (afterWaitWrite when 0): an API server that takes the connection and
	// does not answer (overloaded, restarting) must not hold the agent's
	// request past the approval's own timeout, nor keep its audit chain
	// from its end.
	APITimeout time.Duration

	pending prometheus.Gauge

	mu      sync.Mutex
	waiters map[types.NamespacedName][]chan *v1alpha1.ToolApproval
	// latest is the newest object the watch delivered, per waited-on name.
	latest map[types.NamespacedName]*v1alpha1.ToolApproval
}

// NewBroker returns a broker that counts its pending approvals in the gauge
// mcp_operator_approvals_pending of reg (when not nil).
func NewBroker(c client.Client, reg prometheus.Registerer) *Broker {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mcp_operator_approvals_pending",
		Help: "Requests of agents this bridge replica holds while they wait for a person's decision (ToolApprovals in phase Pending).",
	})
	if reg != nil {
		reg.MustRegister(g)
	}
	return &Broker{
		Client: c, pending: g, Log: logr.Discard(),
		waiters: map[types.NamespacedName][]chan *v1alpha1.ToolApproval{},
		latest:  map[types.NamespacedName]*v1alpha1.ToolApproval{},
	}
}

// Informer is the part of a shared informer the broker needs.
type Informer interface {
	AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
}

// Watch has the broker follow ToolApprovals through inf (an informer on
// ToolApprovals, e.g. from a controller-runtime cache), so that a decision
// reaches whichever waiter holds the request.
func (b *Broker) Watch(inf Informer) error {
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.deliver(obj, false) },
		UpdateFunc: func(_, obj any) { b.deliver(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			b.deliver(obj, true)
		},
	})
	return err
}

// deliver hands a watched object to its waiters; a deleted object is
// delivered with a deletion timestamp so they can tell.
func (b *Broker) deliver(obj any, deleted bool) {
	a, ok := obj.(*v1alpha1.ToolApproval)
	if !ok {
		return
	}
	if deleted {
		a = a.DeepCopy()
		if a.DeletionTimestamp == nil {
			a.DeletionTimestamp = &metav1.Time{Time: b.now()}
		}
	}
	key := types.NamespacedName{Namespace: a.Namespace, Name: a.Name}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, waited := b.waiters[key]; !waited {
		return
	}
	b.latest[key] = a
	for _, ch := range b.waiters[key] {
		select {
		case ch <- a:
		default: // the waiter has an unread update; it reads latest
		}
	}
}

func (b *Broker) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Ask creates the ToolApproval for r and waits until it is decided, expires
// or ctx ends (the agent went away: Cancelled). The approval's status and
// Events record the outcome. An error means no ToolApproval could be put
// to anyone (the request must not go through); the Outcome then has only
// a Message.
func (b *Broker) Ask(ctx context.Context, r Request) (Outcome, error) {
	// Counted from before the object exists, so that whoever sees it
	// Pending also sees it counted.
	b.pending.Inc()
	defer b.pending.Dec()
	a, err := b.create(ctx, r)
	if err != nil {
		return Outcome{Message: err.Error()}, err
	}
	b.event(a, "Normal", "Requested", "Request", "%s asks to %s %s (risk %s); decide with: kubectl mcp approve %s -n %s, or kubectl mcp deny",
		r.Requester.Username, r.Method, r.Target, r.Risk, a.Name, a.Namespace)
	b.notify(ctx, EventRequested, a)
	if r.Pending != nil {
		r.Pending(a.Namespace, a.Name, a.Spec.Request.ExpiresAt.Time)
	}
	return b.Wait(ctx, a)
}

// create writes the ToolApproval for r with status Pending.
func (b *Broker) create(ctx context.Context, r Request) (*v1alpha1.ToolApproval, error) {
	if r.Timeout <= 0 {
		return nil, errors.New("approval: a request needs a positive timeout")
	}
	// Lists and texts are cut to the schema's bounds, so that a caller with
	// many groups or a long reason still gets its question asked.
	requester := r.Requester
	requester.Groups = requester.Groups[:min(len(requester.Groups), 64)]
	req := v1alpha1.ApprovalRequest{
		Requester: requester, Method: r.Method, Server: r.Server, Target: r.Target,
		ArgumentsPreview: textcut.Cut(r.ArgsPreview, 2048), Risk: r.Risk, Rules: r.Rules[:min(len(r.Rules), 32)], Reason: textcut.Cut(r.Reason, 500),
		Modes: r.Modes, ToolCallID: r.ToolCallID,
		// Second precision is what metav1.Time stores; round up so the
		// approval never claims to expire before the request stops waiting.
		ExpiresAt: metav1.Time{Time: b.now().Add(r.Timeout).Add(time.Second - 1).Truncate(time.Second)},
	}
	if r.Method != "resources/read" {
		req.ArgumentsSHA256 = r.ArgsDigest
		if req.ArgumentsSHA256 == "" {
			d, err := canonjson.ArgumentsDigest(r.Args)
			if err != nil {
				return nil, fmt.Errorf("while hashing the arguments: %w", err)
			}
			req.ArgumentsSHA256 = d
		}
	}
	a := &v1alpha1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.Namespace, GenerateName: generateName(r.Server),
			Labels: map[string]string{LabelServer: r.Server},
		},
		Spec: v1alpha1.ToolApprovalSpec{Request: req},
	}
	if r.ToolCallID != "" {
		a.Name, a.GenerateName = approvalName(r.Server, r.ToolCallID), ""
	}
	if err := b.createOnce(ctx, a); err != nil {
		return nil, fmt.Errorf("while creating the ToolApproval: %w", err)
	}
	a.Status = v1alpha1.ToolApprovalStatus{Phase: v1alpha1.ApprovalPending, Message: "waiting for a person's decision"}
	sctx, cancel := b.apiCall(ctx)
	defer cancel()
	if err := b.Client.Status().Update(sctx, a); err != nil {
		// Without Pending the approval still works: the admission policy
		// lets a decision in while no phase is set.
		b.Log.Error(err, "the ToolApproval's status stays unset", "approval", client.ObjectKeyFromObject(a))
	}
	return a, nil
}

// generateName keeps the server's name recognisable within the 253
// characters of an object name, with room for the random suffix.
func generateName(server string) string {
	if len(server) > 200 {
		server = server[:200]
	}
	return server + "-"
}

// approvalName is the name of the ToolApproval for the call toolCallID: the
// server's name and a digest of the call's id. Derived from the call, not
// random, so that a create whose answer was lost can be sent again, or the
// object it may have left removed, by name.
func approvalName(server, toolCallID string) string {
	sum := sha256.Sum256([]byte(toolCallID))
	return generateName(server) + strings.ToLower(base32.StdEncoding.EncodeToString(sum[:])[:10])
}

// annotationCreation marks a ToolApproval with a random value of the
// request that created it: only that request adopts the object after a
// create whose answer was lost, or removes it, whoever else knows its name.
const annotationCreation = "mcp-operator.dev/creation"

// createOnce creates a, named by its call (approvalName), exactly once. A
// create whose answer did not come (a timeout, a connection lost) may still
// have stored the object: it is sent once more, and the object of that name
// that carries this request's creation mark is this request's. If no
// answer says what became of it, the object it may have left is removed in
// the background, so that nobody is asked about a request that is no
// longer waiting.
func (b *Broker) createOnce(ctx context.Context, a *v1alpha1.ToolApproval) error {
	mark := rand.Text()
	if a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	a.Annotations[annotationCreation] = mark
	key := client.ObjectKeyFromObject(a)
	maybeStored := false // a create failed without saying whether it stored a
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		cctx, cancel := b.apiCall(ctx)
		err = b.Client.Create(cctx, a)
		cancel()
		if err == nil {
			return nil
		}
		if apierrors.IsAlreadyExists(err) && maybeStored {
			gctx, cancel := b.apiCall(ctx)
			var stored v1alpha1.ToolApproval
			gerr := b.Client.Get(gctx, key, &stored)
			cancel()
			if gerr == nil && stored.Annotations[annotationCreation] == mark {
				*a = stored // stored by the create whose answer was lost
				return nil
			}
			if gerr != nil {
				err = gerr
			}
			break
		}
		if !apiretry.Transient(err) || a.Name == "" {
			break
		}
		maybeStored = true
		if ctx.Err() != nil {
			break // the request is over: nothing to send again for
		}
	}
	if maybeStored {
		go b.removeOrphan(key, mark)
	}
	return err
}

// removeOrphan deletes the ToolApproval key carrying the creation mark,
// should a create whose answer was lost have stored it: a few times over
// 75 s, as the object may appear any time until the API server's own
// request timeout (60 s by default) has passed. What it misses
// (the API server away all that time) the Reaper ends a minute after the
// approval's expiry.
func (b *Broker) removeOrphan(key client.ObjectKey, mark string) {
	for _, wait := range []time.Duration{2 * time.Second, 8 * time.Second, 20 * time.Second, 45 * time.Second} {
		time.Sleep(wait)
		ctx, cancel := context.WithTimeout(context.Background(), b.apiTimeout())
		var a v1alpha1.ToolApproval
		err := b.Client.Get(ctx, key, &a)
		switch {
		case err == nil && a.Annotations[annotationCreation] != mark:
			cancel()
			return // not this request's
		case err == nil:
			err = b.Client.Delete(ctx, &a, client.Preconditions{UID: &a.UID})
			cancel()
			if err == nil || apierrors.IsNotFound(err) {
				b.Log.Info("removed a ToolApproval whose creation was not answered: nobody was asked", "approval", key)
				return
			}
		default:
			cancel()
		}
	}
}

// Wait waits for the decision of the ToolApproval a (created by this broker
// or by another replica's), its expiry at spec.request.expiresAt, or the
// end of ctx, and records the outcome in its status.
func (b *Broker) Wait(ctx context.Context, a *v1alpha1.ToolApproval) (Outcome, error) {
	key := client.ObjectKeyFromObject(a)
	updates, done := b.subscribe(key)
	defer done()
	// The object may have been decided before the subscription: read it
	// once now that no update can be missed.
	current := a
	var fresh v1alpha1.ToolApproval
	gctx, cancel := b.apiCall(ctx)
	defer cancel()
	if err := b.Client.Get(gctx, key, &fresh); err == nil {
		current = &fresh
	}
	bound := a.Spec.Request
	timer := time.NewTimer(max(0, bound.ExpiresAt.Sub(b.now())))
	defer timer.Stop()
	for {
		if o, ok := b.concluded(current, bound); ok {
			if ctx.Err() != nil {
				wctx, cancel := b.afterWait(ctx)
				defer cancel()
				return b.finish(wctx, current, agentLeft(o)), nil
			}
			fctx, cancel := b.apiCall(ctx)
			defer cancel()
			return b.finish(fctx, current, o), nil
		}
		select {
		case <-updates:
			current = b.newest(key, current)
		case <-timer.C:
			o := Outcome{Phase: v1alpha1.ApprovalExpired, Message: fmt.Sprintf("nobody decided before %s", bound.ExpiresAt.UTC().Format(time.RFC3339))}
			fctx, cancel := b.apiCall(ctx)
			defer cancel()
			return b.finishUnlessDecided(fctx, current, bound, o), nil
		case <-ctx.Done():
			// The cause says who ended it: the agent, or a stopping replica.
			o := Outcome{Phase: v1alpha1.ApprovalCancelled, Message: "the agent's request ended before a decision: " + context.Cause(ctx).Error()}
			// ctx is over; the status write gets its own short deadline.
			wctx, cancel := b.afterWait(ctx)
			defer cancel()
			return b.finishUnlessDecided(wctx, current, bound, o), nil
		}
	}
}

// afterWaitWrite bounds a status write made after the wait's context
// ended, so that a slow API server holds the request no longer than this.
const afterWaitWrite = 10 * time.Second

// apiCall is ctx bounded by APITimeout, for the calls to the API server
// made while ctx lasts.
func (b *Broker) apiCall(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.apiTimeout())
}

func (b *Broker) apiTimeout() time.Duration {
	if b.APITimeout > 0 {
		return b.APITimeout
	}
	return afterWaitWrite
}

// afterWait is the context of the writes made once ctx is over: ctx's
// values, with APITimeout or WriteDeadline, whichever comes first.
func (b *Broker) afterWait(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(b.apiTimeout())
	if b.WriteDeadline != nil {
		if d, ok := b.WriteDeadline(); ok && d.Before(deadline) {
			deadline = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// concluded says whether a holds an outcome: a decision, a deletion, a
// request that is not the one waited on, or a phase another writer ended.
func (b *Broker) concluded(a *v1alpha1.ToolApproval, bound v1alpha1.ApprovalRequest) (Outcome, bool) {
	switch {
	case a.DeletionTimestamp != nil:
		return Outcome{Phase: v1alpha1.ApprovalDenied, Message: "the ToolApproval was deleted before a decision"}, true
	case !sameRequest(a.Spec.Request, bound):
		// The admission policy keeps the request immutable; should it be
		// missing, a changed request still never approves this one.
		return Outcome{Phase: v1alpha1.ApprovalDenied, Message: "the ToolApproval's request was changed: it no longer approves this request"}, true
	case a.Spec.Decision != nil:
		d := a.Spec.Decision
		o := Outcome{Verdict: d.Verdict, Decider: d.Decider, Comment: d.Comment}
		switch {
		case d.Decider == bound.Requester.Username:
			// Separation of duties holds even where the admission policy
			// that checks the decider is missing: nobody approves their
			// own request.
			o.Phase, o.Message = v1alpha1.ApprovalDenied, "denied: "+d.Decider+" asked for this call and cannot decide it"
		case d.Verdict == v1alpha1.VerdictDeny || !Offers(bound.Modes, d.Verdict):
			o.Phase, o.Message = v1alpha1.ApprovalDenied, "denied by "+d.Decider
		default:
			o.Phase, o.Message = v1alpha1.ApprovalApproved, fmt.Sprintf("approved by %s (%s)", d.Decider, d.Verdict)
		}
		return o, true
	case a.Status.Phase == v1alpha1.ApprovalExpired || a.Status.Phase == v1alpha1.ApprovalCancelled:
		return Outcome{Phase: a.Status.Phase, Message: a.Status.Message}, true
	}
	return Outcome{}, false
}

// sameRequest says whether a decision on a approves the request b: the
// same caller in the same session (an AllowSession decision grants that
// session), the same target and arguments, the same call.
func sameRequest(a, b v1alpha1.ApprovalRequest) bool {
	return a.Requester.Username == b.Requester.Username && a.Requester.Session == b.Requester.Session &&
		a.Method == b.Method && a.Target == b.Target && a.Server == b.Server &&
		a.ArgumentsSHA256 == b.ArgumentsSHA256 && a.ToolCallID == b.ToolCallID
}

// finishUnlessDecided ends a with o (expiry or cancellation) unless a
// decision got there first: the status write is conditional on the version
// last seen, and on a conflict the newer object is looked at again.
func (b *Broker) finishUnlessDecided(ctx context.Context, a *v1alpha1.ToolApproval, bound v1alpha1.ApprovalRequest, o Outcome) Outcome {
	for range 3 {
		if decided, ok := b.concluded(a, bound); ok {
			if o.Phase == v1alpha1.ApprovalCancelled {
				decided = agentLeft(decided)
			}
			return b.finish(ctx, a, decided)
		}
		err := b.writeStatus(ctx, a, o)
		if !apierrors.IsConflict(err) {
			break
		}
		var fresh v1alpha1.ToolApproval
		if err := b.Client.Get(ctx, client.ObjectKeyFromObject(a), &fresh); err != nil {
			break
		}
		a = &fresh
	}
	return b.announce(ctx, a, o)
}

// agentLeft is o for a request whose agent has gone: an approval becomes
// Cancelled, since nobody would read the tool's answer and the call must
// not be made upstream.
func agentLeft(o Outcome) Outcome {
	if o.Phase != v1alpha1.ApprovalApproved {
		return o
	}
	o.Phase = v1alpha1.ApprovalCancelled
	o.Message += ", but the agent's request had ended: the call was not made"
	return o
}

// finish records an outcome read from the object (a decision) and announces
// it.
func (b *Broker) finish(ctx context.Context, a *v1alpha1.ToolApproval, o Outcome) Outcome {
	if a.DeletionTimestamp == nil && a.Status.Phase != o.Phase {
		if err := b.writeStatus(ctx, a, o); err != nil && !apierrors.IsNotFound(err) {
			b.Log.Error(err, "the ToolApproval's outcome was not recorded in its status", "approval", client.ObjectKeyFromObject(a), "phase", o.Phase)
		}
	}
	return b.announce(ctx, a, o)
}

func (b *Broker) writeStatus(ctx context.Context, a *v1alpha1.ToolApproval, o Outcome) error {
	u := a.DeepCopy()
	u.Status = v1alpha1.ToolApprovalStatus{Phase: o.Phase, Message: textcut.Cut(o.Message, 1000), FinishedAt: &metav1.Time{Time: b.now()}}
	return b.Client.Status().Update(ctx, u)
}

// announce fills in the names, sends the Event and the notification.
func (b *Broker) announce(ctx context.Context, a *v1alpha1.ToolApproval, o Outcome) Outcome {
	o.Namespace, o.Name = a.Namespace, a.Name
	typ := "Normal"
	if o.Phase != v1alpha1.ApprovalApproved {
		typ = "Warning"
	}
	b.event(a, typ, string(o.Phase), "Decide", "%s: %s", o.Message, a.Spec.Request.Target)
	b.notify(ctx, eventOf(o.Phase), a, o)
	return o
}

func (b *Broker) event(a *v1alpha1.ToolApproval, typ, reason, action, note string, args ...any) {
	if b.Recorder != nil {
		b.Recorder.Eventf(a, nil, typ, reason, action, note, args...)
	}
}

// subscribe registers a waiter for key; done removes it.
func (b *Broker) subscribe(key types.NamespacedName) (<-chan *v1alpha1.ToolApproval, func()) {
	ch := make(chan *v1alpha1.ToolApproval, 1)
	b.mu.Lock()
	b.waiters[key] = append(b.waiters[key], ch)
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		list := b.waiters[key]
		for i, c := range list {
			if c == ch {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(b.waiters, key)
			delete(b.latest, key)
		} else {
			b.waiters[key] = list
		}
	}
}

// newest is the latest watched object of key, or current when the watch has
// delivered nothing newer.
func (b *Broker) newest(key types.NamespacedName, current *v1alpha1.ToolApproval) *v1alpha1.ToolApproval {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a := b.latest[key]; a != nil {
		return a
	}
	return current
}
