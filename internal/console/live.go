package console

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Topics: what changed, so a page refreshes only for its own kind.
const (
	topicApprovals = "approvals"
	topicServers   = "servers"
	topicPolicies  = "policies"
	topicActivity  = "activity"
)

// notice says that something of a topic changed in a namespace.
type notice struct {
	topic, namespace string
}

// hub fans the watches' changes out to the pages' event streams.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch chan notice
	// missed is set when ch was full: the stream then refreshes its page
	// whatever the notice.
	missed atomic.Bool
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

func (h *hub) subscribe() (*subscriber, func()) {
	sub := &subscriber{ch: make(chan notice, 64)}
	h.mu.Lock()
	h.subs[sub] = struct{}{}
	h.mu.Unlock()
	return sub, func() {
		h.mu.Lock()
		delete(h.subs, sub)
		h.mu.Unlock()
	}
}

// publish never blocks a watch: a stream that is behind misses the notice
// and refreshes anyway.
func (h *hub) publish(n notice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		select {
		case sub.ch <- n:
		default:
			sub.missed.Store(true)
		}
	}
}

// handler turns an informer's events into notices of topic.
func (h *hub) handler(topic string) toolscache.ResourceEventHandler {
	ns := func(obj any) string {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if o, ok := obj.(client.Object); ok {
			return o.GetNamespace()
		}
		return ""
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.publish(notice{topic, ns(obj)}) },
		UpdateFunc: func(_, obj any) { h.publish(notice{topic, ns(obj)}) },
		DeleteFunc: func(obj any) { h.publish(notice{topic, ns(obj)}) },
	}
}

// Timing of the event stream.
const (
	// streamHeartbeat keeps proxies from closing an idle stream, and is
	// when an ended session is noticed.
	streamHeartbeat = 20 * time.Second
	// streamCoalesce gathers a burst of changes into one refresh.
	streamCoalesce = 300 * time.Millisecond
)

// refreshedBy says which topics' changes a page shows: the policies page
// decides can-i with the servers' risks too.
var refreshedBy = map[string][]string{
	topicApprovals: {topicApprovals},
	topicServers:   {topicServers},
	topicPolicies:  {topicPolicies, topicServers},
	topicActivity:  {topicActivity},
}

// events is the server-sent event stream a page listens to: "changed" when
// something it shows changed in a namespace the person may see, and
// "signedout" when the session ended. The page fetches itself again; the
// stream carries no data.
func (s *Server) events(w http.ResponseWriter, r *http.Request, x *session) {
	topic := r.URL.Query().Get("topic")
	topics, ok := refreshedBy[topic]
	if !ok {
		http.Error(w, "unknown topic", http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // the stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("retry: 5000\n\n"))
	if rc.Flush() != nil {
		return
	}
	sub, unsubscribe := s.hub.subscribe()
	defer unsubscribe()
	heartbeat := time.NewTicker(streamHeartbeat)
	defer heartbeat.Stop()
	ctx := r.Context()
	relevant := func(n notice) bool {
		for _, t := range topics {
			if n.topic == t {
				resource := map[string]string{topicApprovals: "toolapprovals", topicServers: "mcpservers", topicPolicies: "toolpolicies", topicActivity: "toolapprovals"}[t]
				return n.namespace == "" || s.mayList(ctx, x, n.namespace, resource)
			}
		}
		return false
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-heartbeat.C:
			if !s.sessions.alive(x) {
				_, _ = w.Write([]byte("event: signedout\ndata: \n\n"))
				_ = rc.Flush()
				return
			}
			if _, err := w.Write([]byte(": still here\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		case n := <-sub.ch:
			if !sub.missed.Swap(false) && !relevant(n) {
				continue
			}
			// Let the rest of a burst arrive, then refresh once.
			time.Sleep(streamCoalesce)
			for len(sub.ch) > 0 {
				<-sub.ch
			}
			if _, err := w.Write([]byte("event: changed\ndata: " + topic + "\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}
