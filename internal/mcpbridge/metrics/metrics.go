// Package metrics defines the bridge's Prometheus metrics: calls by server,
// tool, decision and outcome; latency histograms; sessions; requests in
// flight; upstream health; audit drops; the artifact store.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the bridge's collectors.
type Metrics struct {
	// Calls counts tools/call by server, tool (namespaced), decision
	// (allow, deny) and outcome (ok, tool_error, or a failure reason).
	Calls *prometheus.CounterVec
	// CallDuration is the time from request to answer of forwarded calls,
	// by server and method.
	CallDuration *prometheus.HistogramVec
	// Requests counts agent requests by method and HTTP status class.
	Requests *prometheus.CounterVec
	// InFlight is the number of agent requests being served.
	InFlight prometheus.Gauge
	// Sessions is the number of legacy-era sessions live on this replica.
	Sessions prometheus.GaugeFunc
	// UpstreamUp is 1 for a served server whose last call got an answer.
	UpstreamUp *prometheus.GaugeVec
	// AuditDropped is the number of audit events dropped.
	AuditDropped prometheus.CounterFunc
	// ResourceUpdates counts resource updates for agents by server and
	// outcome: queued for the agent's stream, or dropped because the
	// agent's queue was full.
	ResourceUpdates *prometheus.CounterVec
	// Redactions counts the secrets the output pipeline replaced in
	// servers' results, by server.
	Redactions *prometheus.CounterVec
	// InjectionFindings counts the injection scan's findings in servers'
	// results, by server.
	InjectionFindings *prometheus.CounterVec
	// UpstreamSessionsClosed counts the agents' upstream sessions the
	// bridge closed, by server and reason (upstream.Closed*): many closed
	// at the cap (reason cap) say --max-upstream-sessions is too low.
	UpstreamSessionsClosed *prometheus.CounterVec
	// AwayRefusals counts requests answered CodeServerAway, by server and
	// the server's Ready reason (Restarting, Sleeping, PermanentlyFailed...).
	AwayRefusals *prometheus.CounterVec
	// WakeWaits is how long requests waited for a sleeping server, by how
	// the wait ended (woken, failed, timeout, gone, stopping).
	WakeWaits *prometheus.HistogramVec
	// ActivityWrites counts the writes of servers' activity Leases, by kind
	// (activity, wake).
	ActivityWrites *prometheus.CounterVec
}

// New makes the collectors and registers them with reg. sessions and
// auditDropped are read at scrape time.
func New(reg prometheus.Registerer, sessions func() float64, auditDropped func() float64) *Metrics {
	m := &Metrics{
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_bridge_tool_calls_total", Help: "tools/call requests by server, tool, decision and outcome.",
		}, []string{"server", "tool", "decision", "outcome"}),
		CallDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mcp_bridge_upstream_call_duration_seconds", Help: "Duration of calls forwarded to MCP servers.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"server", "method"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_bridge_requests_total", Help: "Agent requests by MCP method and HTTP status code.",
		}, []string{"method", "code"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcp_bridge_requests_in_flight", Help: "Agent requests being served.",
		}),
		Sessions: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcp_bridge_sessions", Help: "Legacy-era MCP sessions live on this replica.",
		}, sessions),
		UpstreamUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcp_bridge_upstream_up", Help: "1 when the last call to the server got an answer, 0 when it failed without one.",
		}, []string{"server"}),
		AuditDropped: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mcp_bridge_audit_events_dropped_total", Help: "Audit events dropped because the sink did not keep up.",
		}, auditDropped),
		ResourceUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_bridge_resource_updates_total", Help: "Resource updates for agents by server and outcome (queued, dropped: the agent's queue was full).",
		}, []string{"server", "outcome"}),
		Redactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_bridge_redactions_total", Help: "Secrets replaced in servers' results (tool results, resources, prompts) by the output pipeline, by server.",
		}, []string{"server"}),
		InjectionFindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_bridge_injection_findings_total", Help: "Injection scan findings in servers' results (tool results, resources, prompts), by server.",
		}, []string{"server"}),
		UpstreamSessionsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_bridge_upstream_sessions_closed_total", Help: "Agents' upstream sessions closed, by server and reason (agent_ended, cap: a caller's own at --max-upstream-sessions, cap_fair_share: one of the caller holding the most, failed, retired, drained, era_changed: the server keeps none now).",
		}, []string{"server", "reason"}),
		AwayRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_bridge_server_away_refusals_total", Help: "Requests answered that their server is not serving now (retryable unless PermanentlyFailed), by server and the server's Ready reason.",
		}, []string{"server", "reason"}),
		WakeWaits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mcp_bridge_wake_wait_seconds", Help: "Time requests waited for a sleeping server, by outcome (woken, failed, timeout, gone, stopping).",
			Buckets: []float64{.1, .25, .5, 1, 1.5, 2, 3, 5, 10, 20, 30, 60},
		}, []string{"outcome"}),
		ActivityWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_bridge_activity_lease_writes_total", Help: "Writes of servers' activity Leases, by kind (activity: a busy server renewed, at most once a minute per server; wake).",
		}, []string{"kind"}),
	}
	reg.MustRegister(m.Calls, m.CallDuration, m.Requests, m.InFlight, m.Sessions, m.UpstreamUp, m.AuditDropped, m.ResourceUpdates, m.Redactions, m.InjectionFindings, m.UpstreamSessionsClosed,
		m.AwayRefusals, m.WakeWaits, m.ActivityWrites)
	return m
}

// RegisterArtifacts registers the artifact store's metrics with reg; stats
// is read at scrape time: the bytes and number of artifacts held, and the
// results refused because the store was full.
func RegisterArtifacts(reg prometheus.Registerer, stats func() (bytes, count, refused int64)) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcp_bridge_artifact_bytes", Help: "Bytes of the artifacts (results over the size cap) in the artifact store.",
		}, func() float64 { b, _, _ := stats(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcp_bridge_artifacts", Help: "Artifacts in the artifact store.",
		}, func() float64 { _, n, _ := stats(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mcp_bridge_artifacts_refused_total", Help: "Results over the size cap that failed because the artifact store was full.",
		}, func() float64 { _, _, r := stats(); return float64(r) }),
	)
}
