package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

const (
	bridgeSelector     = "app.kubernetes.io/component=bridge"
	controllerSelector = "app.kubernetes.io/component=controller"
	bridgePort         = 8090
	bridgeMetricsPort  = 8091
	controllerMetrics  = 8080
)

// replicaSet follows the bridge's pods: their addresses (to reach each
// replica directly) and their audit logs from start to end, deleted pods
// included (a pod's log goes with it).
type replicaSet struct {
	cs *kubernetes.Clientset

	mu       sync.Mutex
	ips      map[string]string // pod name -> IP, Ready pods
	followed map[string]bool
	events   map[string][]auditEvent // pod name -> its events in line order
	clients  map[string]*mcpclient.Client
}

type auditEvent struct {
	Seq        int64  `json:"seq"`
	Type       string `json:"type"`
	ToolCallID string `json:"toolCallId"`
	Decision   string `json:"decision"`
	Resource   string `json:"resource"`
	Prompt     string `json:"prompt"`
	Method     string `json:"method"`
	Tool       string `json:"tool"`
	Time       string `json:"time"` // RFC 3339, UTC, fixed width: compares as text
	pod        string
}

func newReplicaSet(cs *kubernetes.Clientset) *replicaSet {
	return &replicaSet{cs: cs, ips: map[string]string{}, followed: map[string]bool{}, events: map[string][]auditEvent{}, clients: map[string]*mcpclient.Client{}}
}

// watch polls the bridge's pods until ctx ends (a poll survives the API
// server's restart where a watch would need restarting too).
func (s *replicaSet) watch(ctx context.Context) {
	for ctx.Err() == nil {
		pods, err := s.cs.CoreV1().Pods(benchutil.DevBridgeNamespace).List(ctx, metav1.ListOptions{LabelSelector: bridgeSelector})
		if err == nil {
			ips := map[string]string{}
			for _, p := range pods.Items {
				if p.Status.PodIP != "" && p.DeletionTimestamp == nil && podReady(&p) {
					ips[p.Name] = p.Status.PodIP
				}
				running := len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil
				s.mu.Lock()
				start := running && !s.followed[p.Name]
				if start {
					s.followed[p.Name] = true
				}
				s.mu.Unlock()
				if start {
					go s.follow(ctx, p.Name)
				}
			}
			s.mu.Lock()
			s.ips = ips
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// follow reads one pod's log, from its start, until its container ends
// for good (the pod gone, or its container no longer running). A stream
// broken by something else (the API server restarting or overloaded, the
// pod terminating while its container still writes its last events) is
// opened again and read past the events already kept. A container that
// restarted in the same pod numbers its events from 1 again: its events
// are kept as those of "<pod>#<restarts>", a process of their own.
func (s *replicaSet) follow(ctx context.Context, pod string) {
	pods := s.cs.CoreV1().Pods(benchutil.DevBridgeNamespace)
	restarts := int32(-1)
	for ctx.Err() == nil {
		p, err := pods.Get(ctx, pod, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return
		case err != nil: // the API server away or slow: ask again
			time.Sleep(time.Second)
			continue
		case len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil:
			if restarts >= 0 && p.DeletionTimestamp != nil {
				return // stopped for good; its log was read to its end
			}
			time.Sleep(time.Second) // (re)starting
			continue
		}
		key := pod
		if n := p.Status.ContainerStatuses[0].RestartCount; n > 0 {
			key = fmt.Sprintf("%s#%d", pod, n)
		}
		restarts = p.Status.ContainerStatuses[0].RestartCount
		stream, err := pods.GetLogs(pod, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		var lastSeq int64
		s.mu.Lock()
		if ev := s.events[key]; len(ev) > 0 {
			lastSeq = ev[len(ev)-1].Seq
		}
		s.mu.Unlock()
		sc := bufio.NewScanner(stream)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e auditEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type == "" || e.Seq <= lastSeq {
				continue
			}
			lastSeq = e.Seq
			s.mu.Lock()
			s.events[key] = append(s.events[key], e)
			s.mu.Unlock()
		}
		stream.Close()
		time.Sleep(time.Second) // the container's end shows in its status
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// urls are the Ready replicas' /mcp, each replica's own.
func (s *replicaSet) urls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, ip := range s.ips {
		out = append(out, fmt.Sprintf("http://%s:%d/mcp", ip, bridgePort))
	}
	return out
}

// pick is a stateless-era agent of a Ready replica picked at random, not
// the one whose connection is not (when there is another).
func (s *replicaSet) pick(ctx context.Context, token string, not any) (*mcpclient.Client, string, error) {
	urls := s.urls()
	if len(urls) == 0 {
		return nil, "", errors.New("no Ready bridge replica")
	}
	rand.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
	for i, url := range urls {
		c, err := s.client(ctx, url, token)
		if err != nil {
			if i == len(urls)-1 {
				return nil, "", err
			}
			continue
		}
		if any(c.Conn()) == not && i < len(urls)-1 {
			continue
		}
		return c, url, nil
	}
	return nil, "", errors.New("no replica to pick")
}

// client is a stateless-era agent of one replica for the caller of token
// (no session: shared by that caller's calls).
func (s *replicaSet) client(ctx context.Context, url, token string) (*mcpclient.Client, error) {
	key := url + " " + token // a client is one caller's
	s.mu.Lock()
	c := s.clients[key]
	s.mu.Unlock()
	if c != nil {
		return c, nil
	}
	conn, err := streamhttp.New(streamhttp.Options{URL: url, BearerToken: token})
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err = mcpclient.Connect(cctx, conn, mcpclient.Options{ClientName: "soak-replayer", ClientVersion: "1", Era: mcpclient.EraStateless,
		Capabilities: map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.clients[key] = c
	s.mu.Unlock()
	return c, nil
}

// chainEnds are the events that close a call's chain.
var chainEnds = map[string]bool{"tool.completed": true, "tool.failed": true, "mcp.resource.fetched": true, "mcp.prompt.expanded": true}

// chains checks every call's audit chain across the replicas (a
// 2026-07-28 question asked on one replica is answered on another, under
// the same toolCallId): it begins with permission.requested, ends once (a
// denied read or prompt ends at its permission.resolved), nothing follows
// its end, and each replica's part is in seq order. A chain that is only
// the permission.requested of a question by elicitation (tool asked) is a
// question whose answer never got through: counted apart, as asked. It
// returns how many chains there are, how many are incomplete, why, and the
// questions left unanswered.
func (s *replicaSet) chains(asked string) (total, incomplete int, why map[string]int, unanswered int, examples []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	why = map[string]int{}
	byCall := map[string][]auditEvent{}
	for pod, events := range s.events {
		for _, e := range events {
			if e.ToolCallID == "" {
				continue
			}
			e.pod = pod
			byCall[e.ToolCallID] = append(byCall[e.ToolCallID], e)
		}
	}
	for _, chain := range byCall {
		total++
		// Replicas' clocks are the node's: time orders the parts.
		sort.SliceStable(chain, func(i, j int) bool { return chain[i].Time < chain[j].Time })
		if len(chain) == 1 && chain[0].Type == "permission.requested" && chain[0].Tool == asked {
			unanswered++
			continue
		}
		if problem := chainProblem(chain); problem != "" {
			incomplete++
			why[problem]++
			examples = append(examples, describeChain(problem, chain))
		}
	}
	sort.Strings(examples) // by the time of their first event
	return total, incomplete, why, unanswered, examples
}

// describeChain is an incomplete chain on one line, to be set beside the
// faults' and the replicas' times: each event's time, replica, seq, type.
func describeChain(problem string, chain []auditEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (%s):", chain[0].Time, chain[0].ToolCallID, problem)
	for _, e := range chain {
		fmt.Fprintf(&b, " [%s %s #%d %s]", e.Time[min(len(e.Time), 11):], e.pod, e.Seq, e.Type)
	}
	return b.String()
}

func chainProblem(chain []auditEvent) string {
	if chain[0].Type != "permission.requested" {
		return "begins with " + chain[0].Type
	}
	// A subscription the server refused ends as a failed call does, with
	// exactly mcp.call.failed then tool.failed after its
	// mcp.resource.requested (docs/audit.md): that tool.failed is its end.
	// Anything else after it is a second end or out of place.
	refusedFrom := -1
	if n := len(chain); n >= 3 && chain[n-2].Type == "mcp.call.failed" && chain[n-1].Type == "tool.failed" &&
		chain[n-3].Type == "mcp.resource.requested" && chain[n-3].Method != "" {
		refusedFrom = n - 3
	}
	ended := -1
	for i, e := range chain {
		if i > 0 && e.pod == chain[i-1].pod && e.Seq <= chain[i-1].Seq {
			return "out of order"
		}
		end := chainEnds[e.Type] ||
			// A denied read or prompt ends at its decision.
			(e.Type == "permission.resolved" && e.Decision == "deny" && (e.Resource != "" || e.Prompt != "")) ||
			// A subscription the server holds ends when it goes upstream:
			// no fetch follows.
			(e.Type == "mcp.resource.requested" && e.Method != "" && i != refusedFrom)
		if end {
			if ended >= 0 {
				return "two ends"
			}
			ended = i
		}
	}
	switch {
	case ended < 0:
		return "no end (last: " + chain[len(chain)-1].Type + ")"
	case ended != len(chain)-1:
		return chain[ended+1].Type + " after the end"
	}
	return ""
}

// approver decides every pending ToolApproval of the soak's agent:
// AllowOnce, as the cluster's admin (a person other than the requester).
func approver(ctx context.Context, c client.Client, decider, requester string, decided *int) {
	// requester is the agents' common prefix.
	for ctx.Err() == nil {
		var list mcpv1alpha1.ToolApprovalList
		if err := c.List(ctx, &list, client.InNamespace(benchutil.DevNamespace)); err == nil {
			for i := range list.Items {
				a := &list.Items[i]
				if a.Spec.Decision != nil || (a.Status.Phase != "" && a.Status.Phase != mcpv1alpha1.ApprovalPending) || !strings.HasPrefix(a.Spec.Request.Requester.Username, requester) {
					continue
				}
				a.Spec.Decision = &mcpv1alpha1.ApprovalDecision{Verdict: mcpv1alpha1.VerdictAllowOnce, Decider: decider, Comment: "soak: the scripted approver"}
				if c.Update(ctx, a) == nil {
					*decided++
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// pendingApprovals are the soak agent's ToolApprovals still Pending.
func pendingApprovals(ctx context.Context, c client.Client, requester string) (int, error) {
	var list mcpv1alpha1.ToolApprovalList
	if err := c.List(ctx, &list, client.InNamespace(benchutil.DevNamespace)); err != nil {
		return 0, err
	}
	n := 0
	for _, a := range list.Items {
		if strings.HasPrefix(a.Spec.Request.Requester.Username, requester) && (a.Status.Phase == "" || a.Status.Phase == mcpv1alpha1.ApprovalPending) {
			n++
		}
	}
	return n, nil
}

// sample is one reading of a process.
type sample struct {
	at  time.Time
	rss int64
	// anon is the part of rss the process wrote (heap, stacks), the rest
	// being pages of its executable it read: those do not grow with use.
	anon       int64
	fds        int
	goroutines float64
	// heap is the Go heap in use (go_memstats_heap_inuse_bytes): what a
	// leak grows, whatever the runtime keeps of freed memory.
	heap float64
}

// sampler reads the bridge's and the controller's processes on this node
// (RSS and open fds from /proc) and their goroutines (/metrics), per pid.
type sampler struct {
	mu     sync.Mutex
	byProc map[string][]sample // "bridge/<pid>", "controller/<pid>"
}

func (sm *sampler) run(ctx context.Context, cs *kubernetes.Clientset, every time.Duration) {
	sm.byProc = map[string][]sample{}
	for ctx.Err() == nil {
		for _, part := range []struct{ sub, selector string }{{"bridge", bridgeSelector}, {"controller", controllerSelector}} {
			pids, _ := benchutil.ManagerPIDs(part.sub)
			metrics := podMetrics(ctx, cs, part.selector, map[string]int{"bridge": bridgeMetricsPort, "controller": controllerMetrics}[part.sub])
			for _, pid := range pids {
				m := metrics[podIPOf(pid)]
				s := sample{at: time.Now(), rss: benchutil.RSS(pid), anon: benchutil.StatusBytes(pid, "RssAnon"), fds: openFDs(pid), goroutines: m.goroutines, heap: m.heapInuse}
				sm.mu.Lock()
				key := part.sub + "/" + strconv.Itoa(pid)
				sm.byProc[key] = append(sm.byProc[key], s)
				sm.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

// write puts every reading in path, one a line: process, time, RSS, its
// anonymous part, the Go heap in use (bytes), fds, goroutines.
func (sm *sampler) write(path string) error {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	var b strings.Builder
	b.WriteString("process\ttime\trss\tanon\theap_inuse\tfds\tgoroutines\n")
	for _, key := range sortedKeys(sm.byProc) {
		for _, s := range sm.byProc[key] {
			fmt.Fprintf(&b, "%s\t%s\t%d\t%d\t%.0f\t%d\t%.0f\n", key, s.at.UTC().Format(time.RFC3339), s.rss, s.anon, s.heap, s.fds, s.goroutines)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func openFDs(pid int) int {
	entries, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return -1
	}
	return len(entries)
}

// podIPOf is the pod address of a process on this node, read from its
// network namespace's connections (/proc/<pid>/net/tcp: the local address
// of an established one): it matches the process to its pod's /metrics.
func podIPOf(pid int) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "net", "tcp"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "01" { // an established connection names the pod's address
			continue
		}
		local := strings.Split(f[1], ":")[0]
		if len(local) != 8 {
			continue
		}
		var b [4]byte
		for i := range 4 {
			v, _ := strconv.ParseUint(local[2*i:2*i+2], 16, 8)
			b[3-i] = byte(v)
		}
		if b[0] == 127 {
			continue
		}
		return fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3])
	}
	return ""
}


// goMetrics are the figures read from a pod's /metrics.
type goMetrics struct{ goroutines, heapInuse float64 }

// podMetrics reads go_goroutines and go_memstats_heap_inuse_bytes from each
// Ready pod's /metrics, by IP.
func podMetrics(ctx context.Context, cs *kubernetes.Clientset, selector string, port int) map[string]goMetrics {
	out := map[string]goMetrics{}
	pods, err := cs.CoreV1().Pods(benchutil.DevBridgeNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return out
	}
	hc := &http.Client{Timeout: 3 * time.Second}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" {
			continue
		}
		resp, err := hc.Get(fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, port))
		if err != nil {
			continue
		}
		var m goMetrics
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
				m.goroutines, _ = strconv.ParseFloat(v, 64)
			} else if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
				m.heapInuse, _ = strconv.ParseFloat(v, 64)
			}
		}
		out[p.Status.PodIP] = m
		resp.Body.Close()
	}
	return out
}

// minSlopeWindow is the least time after warm-up over which a process's
// slope is taken as its trend: over fewer minutes (a replica deleted soon
// after its warm-up, or one started late in the run) the slope is a heap
// still filling under a load it just took over, extrapolated to 10 minutes.
const minSlopeWindow = 5 * time.Minute

// procSlope is one process's growth after warm-up, in % per 10 minutes.
type procSlope struct {
	key                  string
	window               time.Duration
	rss, fds, goroutines float64
	// anon and heap: the slopes of the written part of rss and of the Go
	// heap in use, which say where a growth of rss is.
	anon, heap float64
	last       sample
}

// slopes are the growth after warm-up of each process of part (bridge or
// controller) with at least three samples past its own warm-up, and the
// largest over those that lived minSlopeWindow past it: RSS, fds and
// goroutines.
func (sm *sampler) slopes(part string, warmup time.Duration) (largest procSlope, procs []procSlope) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	seen := false // largest holds a process's figures
	for _, key := range sortedKeys(sm.byProc) {
		samples := sm.byProc[key]
		if !strings.HasPrefix(key, part+"/") || len(samples) == 0 {
			continue
		}
		var kept []sample
		for _, s := range samples {
			if s.at.Sub(samples[0].at) >= warmup && s.rss > 0 {
				kept = append(kept, s)
			}
		}
		if len(kept) < 3 {
			continue
		}
		p := procSlope{key: key, window: kept[len(kept)-1].at.Sub(kept[0].at), last: kept[len(kept)-1],
			rss: slope(kept, func(s sample) float64 { return float64(s.rss) }),
			fds: slope(kept, func(s sample) float64 { return float64(s.fds) })}
		// A reading without goroutines (the pod's /metrics not reached,
		// or its address not seen) is no reading, not a count of 0.
		var counted []sample
		for _, s := range kept {
			if s.goroutines > 0 {
				counted = append(counted, s)
			}
		}
		if len(counted) >= 3 {
			p.goroutines = slope(counted, func(s sample) float64 { return s.goroutines })
			p.heap = slope(counted, func(s sample) float64 { return s.heap })
		}
		p.anon = slope(kept, func(s sample) float64 { return float64(s.anon) })
		procs = append(procs, p)
		if p.window >= minSlopeWindow {
			if !seen || p.rss >= largest.rss {
				largest.last = p.last // the reading of the process growing most
			}
			if !seen {
				largest.rss, largest.fds, largest.goroutines = p.rss, p.fds, p.goroutines
				seen = true
			}
			largest.rss = max(largest.rss, p.rss)
			largest.fds = max(largest.fds, p.fds)
			largest.goroutines = max(largest.goroutines, p.goroutines)
		}
	}
	return largest, procs
}

// slope is the least-squares slope of v over time, as % of its mean per
// 10 minutes.
func slope(samples []sample, v func(sample) float64) float64 {
	var n, sx, sy, sxx, sxy float64
	t0 := samples[0].at
	for _, s := range samples {
		x := s.at.Sub(t0).Minutes()
		y := v(s)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	den := n*sxx - sx*sx
	if den == 0 || sy == 0 {
		return 0
	}
	perMinute := (n*sxy - sx*sy) / den
	return perMinute * 10 / (sy / n) * 100
}
