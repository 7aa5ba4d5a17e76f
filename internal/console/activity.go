package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Activity keeps the recent calls the bridge's audit stream records, one
// row per call, built from the call's events: who, what, the decision, the
// outcome, how long it took and its trace. It keeps at most Max calls and
// none older than Keep, in memory only.
type Activity struct {
	max  int
	keep time.Duration
	now  func() time.Time

	mu    sync.Mutex
	calls map[string]*Call // by replica and toolCallId
	order []*Call          // oldest first
	// onChange tells the console's pages that a call in the server of
	// this name changed.
	onChange func(server string)
}

// Defaults of NewActivity's bounds.
const (
	DefaultActivityMax  = 5000
	DefaultActivityKeep = time.Hour
)

// NewActivity keeps at most limit calls, none older than keep.
func NewActivity(limit int, keep time.Duration) *Activity {
	if limit <= 0 {
		limit = DefaultActivityMax
	}
	if keep <= 0 {
		keep = DefaultActivityKeep
	}
	return &Activity{max: limit, keep: keep, now: time.Now, calls: map[string]*Call{}}
}

// Call is one tool call, resource read or prompt as the audit events tell it.
type Call struct {
	key        string
	Time       time.Time
	Subject    string
	Target     string // the tool, resource or prompt
	Server     string
	Decision   string
	DecidedBy  string // sourcedFrom of permission.resolved
	Reason     string
	Outcome    string // running, completed, failed, denied
	Error      string
	DurationMs float64
	TraceID    string
}

// auditLine is the part of an audit event the activity page reads.
type auditLine struct {
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	Type        string    `json:"type"`
	Subject     string    `json:"subject"`
	TraceID     string    `json:"traceId"`
	ToolCallID  string    `json:"toolCallId"`
	Tool        string    `json:"tool"`
	Resource    string    `json:"resource"`
	Prompt      string    `json:"prompt"`
	Server      string    `json:"server"`
	Decision    string    `json:"decision"`
	SourcedFrom string    `json:"sourcedFrom"`
	Reason      string    `json:"reason"`
	DurationMs  float64   `json:"durationMs"`
	Error       string    `json:"error"`
}

// Read adds the audit events of one bridge replica's stream, one JSON
// object per line, until r ends. Lines that are not audit events (the
// replica's own logs share its output) are skipped.
func (a *Activity) Read(replica string, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		a.add(replica, sc.Bytes())
	}
	return sc.Err()
}

func (a *Activity) add(replica string, line []byte) {
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var e auditLine
	if json.Unmarshal(line, &e) != nil || e.Seq == 0 || e.ToolCallID == "" {
		return
	}
	if server := a.record(replica, &e); server != "" && a.onChange != nil {
		a.onChange(server)
	}
}

// record folds one event into its call and returns the call's server.
func (a *Activity) record(replica string, e *auditLine) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := replica + "\x00" + e.ToolCallID
	c := a.calls[key]
	if c == nil {
		if a.now().Sub(e.Time) > a.keep {
			return ""
		}
		c = &Call{key: key, Time: e.Time, Outcome: "running"}
		a.calls[key] = c
		a.order = append(a.order, c)
		a.trimLocked()
	}
	if c.Subject == "" {
		c.Subject = e.Subject
	}
	if c.TraceID == "" {
		c.TraceID = e.TraceID
	}
	if t := first(e.Tool, e.Resource, e.Prompt); t != "" && c.Target == "" {
		c.Target = t
	}
	if e.Server != "" {
		c.Server = e.Server
	}
	switch e.Type {
	case "permission.resolved":
		c.Decision, c.DecidedBy, c.Reason = e.Decision, e.SourcedFrom, e.Reason
		if e.Decision == "deny" {
			c.Outcome = "denied"
		}
	case "mcp.call.completed":
		c.DurationMs, c.Outcome = e.DurationMs, "completed"
	case "mcp.call.failed":
		c.DurationMs, c.Outcome, c.Error = e.DurationMs, "failed", e.Error
	case "tool.failed":
		if c.Outcome != "denied" {
			c.Outcome = "failed"
		}
		if c.Error == "" {
			c.Error = e.Reason
		}
	}
	if c.Server == "" {
		c.Server = serverOf(c.Target)
	}
	return c.Server
}

func first(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

// serverOf is the server of mcp.<server>.<name> or mcp://<server>/<uri>.
func serverOf(target string) string {
	if rest, ok := strings.CutPrefix(target, "mcp://"); ok {
		server, _, _ := strings.Cut(rest, "/")
		return server
	}
	if rest, ok := strings.CutPrefix(target, "mcp."); ok {
		server, _, _ := strings.Cut(rest, ".")
		return server
	}
	return ""
}

func (a *Activity) trimLocked() {
	cut := 0
	old := a.now().Add(-a.keep)
	for cut < len(a.order) && (len(a.order)-cut > a.max || a.order[cut].Time.Before(old)) {
		delete(a.calls, a.order[cut].key)
		cut++
	}
	if cut > 0 {
		a.order = slices.Delete(a.order, 0, cut)
	}
}

// recent returns copies of the calls that keep says, newest first, for
// which show is true.
func (a *Activity) recent(show func(*Call) bool, limit int) []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.trimLocked()
	var out []Call
	for i := len(a.order) - 1; i >= 0 && len(out) < limit; i-- {
		if c := a.order[i]; show(c) {
			out = append(out, *c)
		}
	}
	return out
}

// FollowPods follows the logs of the pods matching selector in namespace
// (the bridge's replicas: their stdout is the audit stream), from keep ago,
// until ctx ends. It reads with the console's own identity: get and list
// pods and get pods/log in that namespace alone.
func (a *Activity) FollowPods(ctx context.Context, cs corev1client.PodsGetter, namespace, selector, container string, log func(string, ...any)) {
	followed := map[string]bool{}
	var mu sync.Mutex
	for {
		pods, err := cs.Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			log("console: while listing the bridge pods for their audit stream", "error", err.Error())
		}
		for _, p := range podsRunning(pods) {
			mu.Lock()
			if followed[p] {
				mu.Unlock()
				continue
			}
			followed[p] = true
			mu.Unlock()
			go func(pod string) {
				defer func() { mu.Lock(); delete(followed, pod); mu.Unlock() }()
				since := int64(a.keep.Seconds())
				stream, err := cs.Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true, SinceSeconds: &since}).Stream(ctx)
				if err != nil {
					log("console: while following a bridge pod's audit stream", "pod", pod, "error", err.Error())
					return
				}
				defer stream.Close()
				_ = a.Read(pod, stream)
			}(p)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

func podsRunning(l *corev1.PodList) []string {
	var out []string
	if l == nil {
		return nil
	}
	for _, p := range l.Items {
		if p.Status.Phase == corev1.PodRunning {
			out = append(out, p.Name)
		}
	}
	return out
}

type activityView struct {
	Configured bool
	Keep       time.Duration
	Max        int
	Calls      []activityRow
}

type activityRow struct {
	Call
	Namespace string
	TraceURL  string
}

// maxActivityShown bounds the rows of the activity page.
const maxActivityShown = 500

var traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// activityPage shows the calls to servers in namespaces where the person
// may list ToolApprovals: they see the same arguments and callers there.
// A server name found in several namespaces is shown only to those who may
// see all of them.
func (s *Server) activityPage(r *http.Request, x *session) (string, page, error) {
	ctx := r.Context()
	v := activityView{Configured: s.opts.Activity != nil}
	p := page{Title: "Activity", Nav: "activity", Live: topicActivity, Data: &v}
	if s.opts.Activity == nil {
		return "activity", p, nil
	}
	v.Keep, v.Max = s.opts.Activity.keep, s.opts.Activity.max
	where := s.serverNamespaces(ctx)
	calls := s.opts.Activity.recent(func(c *Call) bool {
		nss := where[c.Server]
		if len(nss) == 0 {
			return false
		}
		for _, ns := range nss {
			if !s.mayList(ctx, x, ns, "toolapprovals") {
				return false
			}
		}
		return true
	}, maxActivityShown)
	for _, c := range calls {
		row := activityRow{Call: c, Namespace: strings.Join(where[c.Server], ",")}
		if s.opts.TraceURL != "" && traceIDPattern.MatchString(c.TraceID) {
			row.TraceURL = strings.ReplaceAll(s.opts.TraceURL, "{traceId}", url.PathEscape(c.TraceID))
		}
		v.Calls = append(v.Calls, row)
	}
	return "activity", p, nil
}

// serverNamespaces maps each MCPServer name to the namespaces holding one.
func (s *Server) serverNamespaces(ctx context.Context) map[string][]string {
	var list v1alpha1.MCPServerList
	out := map[string][]string{}
	if s.cache.List(ctx, &list, client.UnsafeDisableDeepCopy) != nil {
		return out
	}
	for i := range list.Items {
		out[list.Items[i].Name] = append(out[list.Items[i].Name], list.Items[i].Namespace)
	}
	return out
}
