//go:build e2e

package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// The dev cluster's Jaeger (hack/cluster/jaeger.yaml), which make dev points
// the bridge's and the controller's traces at.
const (
	jaegerNamespace = "mcp-tracing"
	jaegerService   = "jaeger"
)

// OTLP span kinds, as Jaeger's query API returns them.
const (
	spanKindServer = 2
	spanKindClient = 3
)

var _ = Describe("traces in the dev cluster's Jaeger", Label("tracing"), func() {
	It("holds a traced agent's call as one trace, from the agent's span to the context the server received", func() {
		Expect(tracingRuns()).To(BeTrue(), "no namespace %s: make e2e runs make dev with MCP_DEV_TRACING=true, which starts Jaeger there", jaegerNamespace)
		// The sample everything-server exports no spans and tells nobody
		// what it was sent: it is reached through a recording proxy on the
		// node, published as a remote MCPServer.
		everything := get(&mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: "everything"}})
		Expect(everything.Status.Endpoint).NotTo(BeNil(), "the sample everything-server has no endpoint")
		proxy := recordCalls(everything.Status.Endpoint.URL)
		// A peer outside the pods' network (here the node's loopback) is
		// turned away.
		Expect(getFrom(netip.MustParseAddr("127.0.0.1"), proxy.url)).To(Equal(http.StatusForbidden))
		server := &mcpv1alpha1.MCPServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: "e2e-traced"},
			Spec:       mcpv1alpha1.MCPServerSpec{Transport: mcpv1alpha1.TransportStreamableHTTP, Remote: &mcpv1alpha1.Remote{URL: proxy.url}},
		}
		Expect(k8sClient.Create(ctx, server)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, server) })
		Eventually(ready(server)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))

		agent := fmt.Sprintf("e2e-traced-%d", time.Now().UnixNano()%1e6)
		const tool = "mcp.e2e-traced.test_simple_text"
		createAgent(agent, []mcpv1alpha1.ToolRule{{Tools: []string{tool}, Decision: mcpv1alpha1.DecisionAllow}})

		// The agent is in a trace of its own: its span's context goes with
		// the call in params._meta.traceparent, sampled.
		traceID, agentSpanID := randomHex(16), randomHex(8)
		steps := finishAgent(startAgent(agent, "--traceparent", "00-"+traceID+"-"+agentSpanID+"-01", "--call", tool))
		Expect(stepOf(steps, "call", tool).Error).To(BeEmpty())

		// The audit line of the call names the trace, and the bridge's span.
		subject := "system:serviceaccount:" + servedNamespace + ":" + agent
		var requestSpanID string
		Eventually(func(g Gomega) {
			var completed []map[string]any
			for _, e := range auditEvents(g) {
				if e["subject"] == subject && e["type"] == "tool.completed" {
					completed = append(completed, e)
				}
			}
			g.Expect(completed).To(HaveLen(1))
			g.Expect(completed[0]).To(HaveKeyWithValue("traceId", traceID))
			requestSpanID, _ = completed[0]["spanId"].(string)
			g.Expect(requestSpanID).To(HaveLen(16))
		}).WithTimeout(20 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		// Jaeger holds the whole trace once the bridge's batch is exported
		// (every 5 s by default).
		query := jaegerQueryURL()
		request, forward := "tools/call "+tool, "tools/call test_simple_text"
		want := []string{request, "authenticate", "decide", forward, "output"}
		byName := map[string]testpeers.JaegerSpan{}
		Eventually(func(g Gomega) {
			spans, err := testpeers.JaegerTrace(query, traceID)
			g.Expect(err).NotTo(HaveOccurred())
			clear(byName)
			for _, s := range spans {
				byName[s.Name] = s
			}
			for _, n := range want {
				g.Expect(byName).To(HaveKey(n), "the trace's spans: %+v", spans)
			}
		}).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())

		// The bridge's request span is the agent's span's child, and the one
		// the audit event named.
		rq := byName[request]
		Expect(rq.Service).To(Equal("mcp-operator-bridge"))
		Expect(rq.Kind).To(Equal(spanKindServer))
		Expect(strings.ToLower(rq.ParentSpanID)).To(Equal(agentSpanID))
		Expect(strings.ToLower(rq.SpanID)).To(Equal(requestSpanID))
		Expect(rq.Attributes).To(HaveKeyWithValue("mcp_operator.decision", "allow"))
		Expect(rq.Attributes).To(HaveKeyWithValue("gen_ai.tool.name", tool))
		Expect(rq.Attributes).To(HaveKeyWithValue("mcp_operator.server", "e2e-traced"))
		// The stages are its children.
		for _, n := range want[1:] {
			Expect(strings.ToLower(byName[n].ParentSpanID)).To(Equal(requestSpanID), "the parent of stage %q", n)
		}
		Expect(byName["decide"].Attributes).To(HaveKeyWithValue("mcp_operator.decision", "allow"))
		// The upstream end: the bridge's CLIENT span of the call, whose
		// context is what the server received, in the header and in _meta.
		fw := byName[forward]
		Expect(fw.Kind).To(Equal(spanKindClient))
		Expect(fw.Attributes).To(HaveKeyWithValue("mcp_operator.server", "e2e-traced"))
		Expect(fw.Attributes).To(HaveKeyWithValue("gen_ai.tool.name", "test_simple_text"))
		sent := "00-" + traceID + "-" + strings.ToLower(fw.SpanID) + "-01"
		Expect(proxy.traces()).To(Equal([]seenTrace{{header: sent, meta: sent}}))

		// The controller traces too: its reconciles reach the same Jaeger.
		Eventually(jaegerServices).WithArguments(query).WithTimeout(30 * time.Second).WithPolling(time.Second).
			Should(ContainElements("mcp-operator-bridge", "mcp-operator-controller"))
	})
})

// seenTrace is the trace context one tools/call brought to the server: its
// traceparent header and params._meta.traceparent.
type seenTrace struct{ header, meta string }

// seenCall is one tools/call the recording proxy passed on: its HTTP headers
// and its params._meta.traceparent.
type seenCall struct {
	header      http.Header
	traceparent string
}

// recordingProxy is a reverse proxy that records the tools/call requests it
// passes on. It listens on the pods' gateway, the node's address on the pods'
// bridge, and serves pods only: nothing else on the machine's network may
// reach the server past the bridge, the policy and the audit.
type recordingProxy struct {
	url  string
	mu   sync.Mutex
	seen []seenCall
}

// With a serving certificate (issued for the gateway's address) it serves
// https, as a server that receives each caller's own credential must be.
func recordCalls(target string, serving ...func(gateway netip.Addr) tls.Certificate) *recordingProxy {
	u, err := url.Parse(target)
	Expect(err).NotTo(HaveOccurred())
	gateway, pods := podGateway()
	l, err := net.Listen("tcp", net.JoinHostPort(gateway.String(), "0"))
	Expect(err).NotTo(HaveOccurred())
	scheme := "http"
	if len(serving) > 0 {
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{serving[0](gateway)}, MinVersion: tls.VersionTLS12})
		scheme = "https"
	}
	p := &recordingProxy{url: scheme + "://" + l.Addr().String() + u.Path}
	forward := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	forward.FlushInterval = -1 // event streams pass as they come
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if peer, err := netip.ParseAddrPort(r.RemoteAddr); err != nil || !pods.Contains(peer.Addr().Unmap()) {
			http.Error(w, "only pods may use this proxy", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Meta struct {
						Traceparent string `json:"traceparent"`
					} `json:"_meta"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
				p.mu.Lock()
				p.seen = append(p.seen, seenCall{header: r.Header.Clone(), traceparent: msg.Params.Meta.Traceparent})
				p.mu.Unlock()
			}
		}
		forward.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	return p
}

func (p *recordingProxy) calls() []seenCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenCall(nil), p.seen...)
}

// traces is the trace context of each tools/call passed on.
func (p *recordingProxy) traces() []seenTrace {
	var out []seenTrace
	for _, c := range p.calls() {
		out = append(out, seenTrace{header: c.header.Get("traceparent"), meta: c.traceparent})
	}
	return out
}

// podGateway is the node's address on the pods' network and that network:
// the address of the machine's interface whose network holds a pod's IP
// (the CNI bridge's gateway).
func podGateway() (netip.Addr, netip.Prefix) {
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods)).To(Succeed())
	var podIP netip.Addr
	for _, p := range pods.Items {
		if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil && !p.Spec.HostNetwork && ip.Is4() {
			podIP = ip
			break
		}
	}
	Expect(podIP.IsValid()).To(BeTrue(), "no pod on the pods' network has an IP yet")
	addrs, err := net.InterfaceAddrs()
	Expect(err).NotTo(HaveOccurred())
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP)
		ones, _ := n.Mask.Size()
		if prefix := netip.PrefixFrom(ip.Unmap(), ones); prefix.Contains(podIP) {
			return prefix.Addr(), prefix.Masked()
		}
	}
	Fail(fmt.Sprintf("no interface of the node is on the network of pod IP %s", podIP))
	return netip.Addr{}, netip.Prefix{}
}

// getFrom is the status of a GET of target sent from the local address from.
func getFrom(from netip.Addr, target string) int {
	dialer := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0)), Timeout: 10 * time.Second}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
	resp, err := c.Get(target)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	return resp.StatusCode
}

// tracingRuns says whether make dev started the dev cluster's Jaeger
// (MCP_DEV_TRACING=true).
func tracingRuns() bool {
	err := k8sClient.Get(ctx, client.ObjectKey{Name: jaegerNamespace}, &corev1.Namespace{})
	if apierrors.IsNotFound(err) {
		return false
	}
	Expect(err).NotTo(HaveOccurred())
	return true
}

// jaegerQueryURL is the base URL of the dev cluster's Jaeger query API, by
// its Service's IP (no cluster DNS; kube-proxy routes it from the node).
func jaegerQueryURL() string {
	var svc corev1.Service
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: jaegerNamespace, Name: jaegerService}, &svc)).To(Succeed())
	for _, p := range svc.Spec.Ports {
		if p.Name == "query" {
			return fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, p.Port)
		}
	}
	Fail("Jaeger's Service has no port named query")
	return ""
}

// jaegerServices are the services Jaeger holds spans of.
func jaegerServices(query string) ([]string, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(query + "/api/v3/services")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaeger's query API answered %d", resp.StatusCode)
	}
	var doc struct {
		Services []string `json:"services"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	return doc.Services, err
}

// randomHex is n random bytes in lower-case hex: a W3C trace or span id.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
