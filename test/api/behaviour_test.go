package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

var _ = Describe("config/samples", func() {
	It("are all accepted by the API server", func() {
		root, err := testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		files, err := filepath.Glob(filepath.Join(root, "config", "samples", "mcp-operator_*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty())
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "samples"}}
		Expect(k8sClient.Create(ctx, ns)).To(Succeed())

		kinds := map[string]int{}
		for _, f := range files {
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
			for {
				u := &unstructured.Unstructured{}
				err := dec.Decode(&u.Object)
				if err == io.EOF {
					break
				}
				Expect(err).NotTo(HaveOccurred(), f)
				if len(u.Object) == 0 {
					continue
				}
				u.SetNamespace(ns.Name)
				Expect(k8sClient.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed(), "%s: %s %s", filepath.Base(f), u.GetKind(), u.GetName())
				kinds[u.GetKind()]++
			}
		}
		Expect(kinds).To(HaveKeyWithValue("MCPServer", 5))
		Expect(kinds).To(HaveKeyWithValue("ToolPolicy", 1))
	})
})

var _ = Describe("defaults", func() {
	It("fill in every unset MCPServer field that has a default", func() {
		name := uniqueName("defaults")
		Expect(create(object("MCPServer", name, validWorkload))).To(Succeed())
		var s mcpv1alpha1.MCPServer
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &s)).To(Succeed())

		w := s.Spec.Workload
		Expect(w.Port).To(Equal(int32(8080)))
		Expect(w.Path).To(Equal("/mcp"))
		Expect(w.Network.Egress).To(Equal(mcpv1alpha1.EgressDNS))
		Expect(w.Resources).NotTo(BeNil())
		Expect(w.Resources.Requests).To(Equal(corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
		}))
		Expect(w.Resources.Limits).To(Equal(corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
		}))
		Expect(s.Spec.Tools.CatalogPinning).To(Equal(mcpv1alpha1.CatalogPinningAuto))
		Expect(s.Spec.Tools.TrustAnnotations).To(BeFalse())
		rp := s.Spec.RestartPolicy
		Expect(rp.Enabled).To(Equal(ptr.To(true)))
		Expect(rp.MaxRestarts).To(Equal(ptr.To(int32(3))))
		Expect(rp.BackoffBase.Duration).To(Equal(500 * time.Millisecond))
		Expect(rp.BackoffCap.Duration).To(Equal(10 * time.Second))
		Expect(rp.StableAfter.Duration).To(Equal(2 * time.Minute))
		Expect(s.Spec.Probe.Timeout.Duration).To(Equal(10 * time.Second))
		Expect(s.Spec.Probe.Interval.Duration).To(Equal(5 * time.Minute))
		Expect(s.Spec.Suspend).To(BeFalse())
		Expect(s.Spec.ServerRequests).To(Equal(mcpv1alpha1.ServerRequests{
			Elicitation: mcpv1alpha1.RelayAllowed, Sampling: mcpv1alpha1.RelayRefused,
		}))
	})

	It("fill in the ToolPolicy's approval settings", func() {
		name := uniqueName("defaults")
		Expect(create(object("ToolPolicy", name, validPolicy+`
rules: [{tools: ["mcp.**"], decision: ask}]`))).To(Succeed())
		var p mcpv1alpha1.ToolPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &p)).To(Succeed())
		Expect(p.Spec.Approval.Timeout.Duration).To(Equal(2 * time.Minute))
		Expect(p.Spec.Approval.Modes).To(ConsistOf(mcpv1alpha1.ApprovalAllowOnce, mcpv1alpha1.ApprovalAllowSession))
	})

	It("flag injection, not block it, on tool and prompt rules that do not say", func() {
		name := uniqueName("defaults")
		Expect(create(object("ToolPolicy", name, validPolicy+`
rules: [{tools: ["mcp.**"], decision: allow}]
prompts: [{prompts: ["mcp.**"], decision: allow}]`))).To(Succeed())
		var p mcpv1alpha1.ToolPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &p)).To(Succeed())
		Expect(p.Spec.Rules[0].Injection).To(Equal(mcpv1alpha1.InjectionFlag))
		Expect(p.Spec.Prompts[0].Injection).To(Equal(mcpv1alpha1.InjectionFlag))
	})
})

var _ = Describe("the status subresource", func() {
	It("keeps status and spec apart", func() {
		name := uniqueName("status")
		Expect(create(object("MCPServer", name, validWorkload))).To(Succeed())
		key := client.ObjectKey{Namespace: "default", Name: name}
		var s mcpv1alpha1.MCPServer
		Expect(k8sClient.Get(ctx, key, &s)).To(Succeed())
		generation := s.Generation

		s.Status.ToolCount = 7
		s.Status.ObservedGeneration = generation
		s.Status.Restarts.Total = 2
		s.Status.Conditions = []metav1.Condition{{
			Type: mcpv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Serving",
			Message: "catalog published", LastTransitionTime: metav1.Now(), ObservedGeneration: generation,
		}}
		Expect(k8sClient.Status().Update(ctx, &s)).To(Succeed())

		Expect(k8sClient.Get(ctx, key, &s)).To(Succeed())
		Expect(s.Status.ToolCount).To(Equal(int32(7)))
		Expect(s.Generation).To(Equal(generation), "a status write must not bump the generation")

		// A write of the main resource ignores status and bumps the generation.
		s.Status.ToolCount = 99
		s.Spec.Suspend = true
		Expect(k8sClient.Update(ctx, &s)).To(Succeed())
		Expect(k8sClient.Get(ctx, key, &s)).To(Succeed())
		Expect(s.Status.ToolCount).To(Equal(int32(7)))
		Expect(s.Generation).To(Equal(generation + 1))
	})

	It("serves the printer columns kubectl get shows", func() {
		name := uniqueName("columns")
		Expect(create(object("MCPServer", name, validWorkload))).To(Succeed())
		key := client.ObjectKey{Namespace: "default", Name: name}
		var s mcpv1alpha1.MCPServer
		Expect(k8sClient.Get(ctx, key, &s)).To(Succeed())
		s.Status.ToolCount = 12
		s.Status.Restarts.Total = 3
		s.Status.Conditions = []metav1.Condition{{
			Type: mcpv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Serving",
			Message: "catalog published", LastTransitionTime: metav1.Now(),
		}}
		Expect(k8sClient.Status().Update(ctx, &s)).To(Succeed())

		table := getTable("mcpservers", name)
		Expect(table.columns).To(Equal([]string{"Name", "Transport", "Ready", "Reason", "Asleep", "Tools", "Restarts", "Age"}))
		Expect(table.row[:7]).To(Equal([]any{name, "streamable-http", "True", "Serving", nil, float64(12), float64(3)}))

		// A sleeping server says so, and since when, and keeps its tools.
		since := metav1.NewTime(time.Now().Add(-2 * time.Hour))
		s.Status.SleepingSince = &since
		s.Status.Conditions[0].Status, s.Status.Conditions[0].Reason = metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping
		Expect(k8sClient.Status().Update(ctx, &s)).To(Succeed())
		table = getTable("mcpservers", name)
		Expect(table.row[:7]).To(Equal([]any{name, "streamable-http", "False", "Sleeping", "120m", float64(12), float64(3)}))
	})

	It("registers the short names mcps and tp", func() {
		resources, err := disco.ServerResourcesForGroupVersion(mcpv1alpha1.GroupVersion.String())
		Expect(err).NotTo(HaveOccurred())
		short := map[string][]string{}
		for _, r := range resources.APIResources {
			short[r.Name] = r.ShortNames
		}
		Expect(short).To(HaveKeyWithValue("mcpservers", ContainElement("mcps")))
		Expect(short).To(HaveKeyWithValue("toolpolicies", ContainElement("tp")))
	})
})

type table struct {
	columns []string
	row     []any
}

// getTable asks the API server for the Table rendering kubectl get uses.
func getTable(plural, name string) table {
	httpClient, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	url := fmt.Sprintf("%s/apis/%s/namespaces/default/%s/%s", strings.TrimSuffix(cfg.Host, "/"), mcpv1alpha1.GroupVersion, plural, name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	var t metav1.Table
	Expect(json.NewDecoder(resp.Body).Decode(&t)).To(Succeed())
	Expect(t.Rows).To(HaveLen(1))
	var out table
	for _, c := range t.ColumnDefinitions {
		if c.Priority == 0 {
			out.columns = append(out.columns, c.Name)
		}
	}
	out.row = t.Rows[0].Cells
	return out
}
