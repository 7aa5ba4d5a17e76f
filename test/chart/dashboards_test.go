package chart_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mcp-operator/mcp-operator/internal/approval"
	"github.com/mcp-operator/mcp-operator/internal/controller"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/metrics"
)

// The dashboard and the alert rules query only what the binaries export:
// every metric name and label in their PromQL is one of a collector the
// bridge or the controller registers (read from the real registrations:
// the bridge's metrics, its artifact store's and approval broker's, and the
// controller's own).

// exportedMetric is one metric the binaries export.
type exportedMetric struct {
	labels    []string
	histogram bool
}

// registrations records the collectors registered with it.
type registrations struct{ collectors []prometheus.Collector }

func (r *registrations) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}
func (r *registrations) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}
func (r *registrations) Unregister(prometheus.Collector) bool { return false }

// descPattern reads a Desc's name and variable labels from its String form:
// client_golang has no accessor for a Desc's labels.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^}]*)\}\}$`)

func exportedMetrics(t *testing.T) map[string]exportedMetric {
	t.Helper()
	reg := &registrations{}
	zero := func() float64 { return 0 }
	metrics.New(reg, zero, zero)
	metrics.RegisterArtifacts(reg, func() (int64, int64, int64) { return 0, 0, 0 })
	approval.NewBroker(nil, reg)
	reg.collectors = append(reg.collectors, controller.Collectors()...)

	out := map[string]exportedMetric{}
	for _, c := range reg.collectors {
		histogram := false
		switch c.(type) {
		case *prometheus.HistogramVec, prometheus.Histogram:
			histogram = true
		}
		descs := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			m := descPattern.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			var labels []string
			for _, l := range strings.Split(m[2], ",") {
				if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
					labels = append(labels, l)
				}
			}
			out[m[1]] = exportedMetric{labels: labels, histogram: histogram}
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d metrics registered: %v", len(out), out)
	}
	return out
}

// promQLToken is a token of a PromQL expression: an identifier, a string,
// a number or duration, a $variable, or an operator or bracket.
type promQLToken struct {
	kind byte // i, s, n, v, p
	text string
}

var tokenPattern = regexp.MustCompile(`^(?:("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|([a-zA-Z_:][a-zA-Z0-9_:]*)|(\$\{?[a-zA-Z0-9_]+\}?)|([0-9][0-9.]*[a-z]*)|(=~|!~|!=|==|>=|<=|[-+*/%^(){}\[\],=<>@]))`)

func tokenize(expr string) ([]promQLToken, error) {
	var out []promQLToken
	for rest := strings.TrimSpace(expr); rest != ""; rest = strings.TrimSpace(rest) {
		m := tokenPattern.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("cannot read %q", rest)
		}
		kind := byte('p')
		switch {
		case m[1] != "":
			kind = 's'
		case m[2] != "":
			kind = 'i'
		case m[3] != "":
			kind = 'v'
		case m[4] != "":
			kind = 'n'
		}
		out = append(out, promQLToken{kind, m[0]})
		rest = rest[len(m[0]):]
	}
	return out, nil
}

// PromQL words that are not metric names.
var promQLWords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}

// grouping words take a parenthesised list of labels.
var groupingWords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// checkPromQL says what in expr the binaries do not export: unknown metric
// names, labels no metric of the expression has, labels of a selector its
// metric lacks.
func checkPromQL(expr string, exported map[string]exportedMetric) []string {
	toks, err := tokenize(expr)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	known := func(name string) (exportedMetric, bool) {
		if m, ok := exported[name]; ok {
			return m, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if m, ok := exported[strings.TrimSuffix(name, suffix)]; ok && m.histogram && strings.HasSuffix(name, suffix) {
				if suffix == "_bucket" {
					m.labels = append(slices.Clone(m.labels), "le")
				}
				return m, true
			}
		}
		return exportedMetric{}, false
	}
	var used []exportedMetric
	var grouped []string
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		next := promQLToken{}
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch {
		case tok.text == "[":
			for i < len(toks) && toks[i].text != "]" {
				i++
			}
		case tok.kind == 'i' && slices.Contains(groupingWords, tok.text) && next.text == "(":
			for i += 2; i < len(toks) && toks[i].text != ")"; i++ {
				if toks[i].kind == 'i' {
					grouped = append(grouped, toks[i].text)
				}
			}
		case tok.kind == 'i' && (next.text == "(" || slices.Contains(groupingWords, next.text)), tok.kind == 'i' && slices.Contains(promQLWords, tok.text):
			// A function or an aggregation (sum by (…) (…)), or an operator
			// word.
		case tok.kind == 'i':
			m, ok := known(tok.text)
			if !ok {
				problems = append(problems, "metric "+tok.text+" is not exported")
				continue
			}
			used = append(used, m)
			if next.text != "{" {
				continue
			}
			for i += 2; i < len(toks) && toks[i].text != "}"; i++ {
				if toks[i].kind == 'i' && !slices.Contains(m.labels, toks[i].text) {
					problems = append(problems, fmt.Sprintf("metric %s has no label %s", tok.text, toks[i].text))
				}
				i += 2 // the operator and the value
				if i+1 < len(toks) && toks[i+1].text == "," {
					i++
				}
			}
		}
	}
	for _, l := range grouped {
		found := false
		for _, m := range used {
			found = found || slices.Contains(m.labels, l)
		}
		if !found {
			problems = append(problems, "no metric of the expression has the label "+l)
		}
	}
	return problems
}

// TestPromQLCheckFindsMistakes: the check below is able to fail.
func TestPromQLCheckFindsMistakes(t *testing.T) {
	exported := exportedMetrics(t)
	for expr, want := range map[string]string{
		`sum(rate(mcp_bridge_tool_call_total[5m]))`:                                                               "metric mcp_bridge_tool_call_total is not exported",
		`sum by (namespace) (rate(mcp_bridge_tool_calls_total[5m]))`:                                              "no metric of the expression has the label namespace",
		`rate(mcp_bridge_tool_calls_total{verdict="deny"}[5m])`:                                                   "metric mcp_bridge_tool_calls_total has no label verdict",
		`mcp_bridge_requests_in_flight_bucket`:                                                                    "metric mcp_bridge_requests_in_flight_bucket is not exported",
		`histogram_quantile(0.9, sum by (le, tool) (rate(mcp_bridge_upstream_call_duration_seconds_bucket[5m])))`: "label tool",
	} {
		problems := checkPromQL(expr, exported)
		if len(problems) == 0 || !strings.Contains(strings.Join(problems, "; "), want) {
			t.Errorf("%s: problems %v, want %q", expr, problems, want)
		}
	}
	if p := checkPromQL(`histogram_quantile(0.9, sum by (server, le) (rate(mcp_bridge_upstream_call_duration_seconds_bucket{server=~"$server"}[$__rate_interval])))`, exported); len(p) != 0 {
		t.Errorf("a correct expression has problems: %v", p)
	}
}

// TestDashboardAndRulesQueryExportedMetrics renders the chart with the
// dashboard and the rules on and checks every query of both.
func TestDashboardAndRulesQueryExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	rendered := helmTemplate(t, "--set", "dashboard.enabled=true", "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels.release=prom")

	cm := rendered.find("ConfigMap", "mcp-operator-dashboard")
	if cm == nil {
		t.Fatal("dashboard.enabled=true renders no ConfigMap mcp-operator-dashboard")
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard's ConfigMap labels %v lack the sidecar's grafana_dashboard", cm.GetLabels())
	}
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "mcp-operator.json")
	var dash struct {
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	queries := map[string]string{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, target := range p.Targets {
			queries[fmt.Sprintf("panel %q query %d", p.Title, i)] = target.Expr
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(([a-z_:]+), *([a-z_]+)\)$`)
	for _, v := range dash.Templating.List {
		q, _ := v.Query.(string)
		if m := labelValues.FindStringSubmatch(q); m != nil {
			if metric, ok := exported[m[1]]; !ok || !slices.Contains(metric.labels, m[2]) {
				t.Errorf("variable %s: %s is not an exported metric with the label %s", v.Name, m[1], m[2])
			}
		}
	}

	rule := rendered.find("PrometheusRule", "mcp-operator")
	if rule == nil {
		t.Fatal("prometheusRule.enabled=true renders no PrometheusRule")
	}
	if rule.GetLabels()["release"] != "prom" {
		t.Errorf("PrometheusRule labels %v lack release=prom", rule.GetLabels())
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	alerts := 0
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			queries["alert "+r["alert"].(string)] = r["expr"].(string)
			alerts++
		}
	}
	if len(dash.Panels) < 10 || alerts < 6 {
		t.Fatalf("%d panels and %d alerts: the dashboard or the rules lost their content", len(dash.Panels), alerts)
	}

	// What the issue asks the dashboard to show, each by its metric.
	all := strings.Join(slices.Collect(maps.Values(queries)), "\n")
	for _, metric := range []string{"mcp_bridge_tool_calls_total", "mcp_bridge_upstream_call_duration_seconds_bucket", "mcp_operator_approvals_pending",
		"mcp_bridge_redactions_total", "mcp_bridge_injection_findings_total", "mcp_bridge_upstream_up", "mcp_operator_server_crashes_total",
		"mcp_operator_server_ready", "mcp_bridge_audit_events_dropped_total", "mcp_operator_server_sleeping", "mcp_operator_server_wakes_total",
		"mcp_operator_server_wake_seconds_bucket"} {
		if !strings.Contains(all, metric) {
			t.Errorf("neither the dashboard nor the rules query %s", metric)
		}
	}
	for where, expr := range queries {
		for _, p := range checkPromQL(expr, exported) {
			t.Errorf("%s: %s (%s)", where, p, expr)
		}
	}

	for _, off := range []string{"ConfigMap", "PrometheusRule"} {
		if n := len(helmTemplate(t).ofKind(off)); n != 0 {
			t.Errorf("%d %s rendered by default", n, off)
		}
	}
}
