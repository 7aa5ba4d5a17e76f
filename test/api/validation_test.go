package api_test

import (
	"fmt"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

var nameSeq atomic.Int64

// uniqueName keeps the objects of different specs apart in one API server.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1))
}

// object builds an MCPServer or ToolPolicy in namespace default from the YAML of
// its spec, as a user would write it.
func object(kind, name, specYAML string) *unstructured.Unstructured {
	var spec map[string]any
	Expect(yaml.Unmarshal([]byte(specYAML), &spec)).To(Succeed(), "spec YAML of the test case")
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "mcp-operator.dev/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       spec,
	}}
	return u
}

// create sends the object with strict field validation, as kubectl does by
// default, so unknown fields are errors rather than silently dropped.
func create(u *unstructured.Unstructured) error {
	return k8sClient.Create(ctx, u, client.FieldValidation("Strict"))
}

// expectRejected checks that the API server refused the object as invalid
// and that its message carries what the user must fix.
func expectRejected(err error, message string) {
	ExpectWithOffset(1, err).To(HaveOccurred(), "the API server accepted an invalid object")
	ExpectWithOffset(1, apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)).To(BeTrue(), "want Invalid or BadRequest, got %v", err)
	ExpectWithOffset(1, err.Error()).To(ContainSubstring(message))
}

const validWorkload = `
transport: streamable-http
workload: {image: example.com/server:1}
`

var _ = Describe("MCPServer validation", func() {
	It("accepts a minimal server", func() {
		Expect(create(object("MCPServer", uniqueName("minimal"), validWorkload))).To(Succeed())
	})

	It("accepts each kind of upstream credential", func() {
		for _, auth := range []string{
			`{bearerTokenSecretRef: {name: s, key: token}}`,
			`{tokenExchange: {tokenURL: "https://idp.example.com/token", audience: github, resource: "https://api.github.com", scopes: [repo], clientSecretRef: {name: c}}}`,
			// http on loopback: a token endpoint beside the bridge.
			`{tokenExchange: {tokenURL: "http://127.0.0.1:8080/token", audience: a, clientSecretRef: {name: c}, subjectTokenType: "urn:ietf:params:oauth:token-type:jwt"}}`,
			`{perCallerSecret: {key: token}}`,
			// The operator's own credential beside a per-caller kind.
			`{bearerTokenSecretRef: {name: s, key: token}, perCallerSecret: {key: token, header: X-Api-Key}}`,
		} {
			Expect(create(object("MCPServer", uniqueName("creds"), `
transport: streamable-http
remote: {url: "https://mcp.example.com/mcp", auth: `+auth+`}
`))).To(Succeed(), auth)
		}
	})

	It("accepts shared headers other than the caller's, and a per-caller credential to a loopback server over http", func() {
		Expect(create(object("MCPServer", uniqueName("shared-hdr"), `
transport: streamable-http
remote:
  url: "http://127.0.0.1:8080/mcp"
  headersFrom: [{name: X-Tenant, secretKeyRef: {name: s, key: k}}]
  auth: {perCallerSecret: {key: token, header: X-Api-Key}}
`))).To(Succeed())
	})

	It("accepts an idle time of a second or more", func() {
		Expect(create(object("MCPServer", uniqueName("sleepy"), `
transport: streamable-http
workload: {image: example.com/server:1, idle: 1s}
`))).To(Succeed())
	})

	DescribeTable("rejects invalid servers with a message that says what to fix",
		func(specYAML, message string) {
			expectRejected(create(object("MCPServer", uniqueName("bad"), specYAML)), message)
		},
		// Cross-field CEL rules.
		Entry("both workload and remote", `
transport: streamable-http
workload: {image: x}
remote: {url: "https://mcp.example.com/mcp"}`, "exactly one of spec.workload"),
		Entry("neither workload nor remote", `transport: streamable-http`, "exactly one of spec.workload"),
		Entry("an unknown server request setting", validWorkload+`
serverRequests: {sampling: Always}`, `supported values: "Relay", "Refuse"`),
		Entry("remote over stdio", `
transport: stdio
remote: {url: "https://mcp.example.com/mcp"}`, "spec.remote servers are reached over streamable-http only"),
		Entry("stdio without command", `
transport: stdio
workload: {image: x}`, "spec.transport stdio needs spec.workload.command"),
		Entry("stdio with an empty command", `
transport: stdio
workload: {image: x, command: []}`, "spec.transport stdio needs spec.workload.command"),
		Entry("Locked pinning without approvedDigest", validWorkload+`
tools: {catalogPinning: Locked}`, "catalogPinning Locked needs approvedDigest"),
		Entry("backoffBase above backoffCap", validWorkload+`
restartPolicy: {backoffBase: 20s, backoffCap: 10s}`, "backoffBase must not exceed backoffCap"),
		Entry("backoffBase of zero", validWorkload+`
restartPolicy: {backoffBase: 0s}`, "backoffBase must be positive"),
		Entry("idle under a second", `
transport: streamable-http
workload: {image: x, idle: 500ms}`, "idle must be at least 1s"),
		Entry("backoffCap above an hour", validWorkload+`
restartPolicy: {backoffCap: 2h}`, "backoffCap must be at most 1h"),
		Entry("stableAfter under a second", validWorkload+`
restartPolicy: {stableAfter: 10ms}`, "stableAfter must be at least 1s"),
		Entry("probe timeout too short", validWorkload+`
probe: {timeout: 1ms}`, "probe timeout must be between 100ms and 5m"),
		Entry("probe interval too short", validWorkload+`
probe: {interval: 1s}`, "probe interval must be between 5s and 24h"),
		Entry("remote URL that is not http(s)", `
transport: streamable-http
remote: {url: "ftp://mcp.example.com/mcp"}`, "url must be an absolute http:// or https:// URL"),
		Entry("remote URL without a host", `
transport: streamable-http
remote: {url: "not a url"}`, "url must be an absolute http:// or https:// URL"),
		Entry("a header the transport owns", `
transport: streamable-http
remote:
  url: "https://mcp.example.com/mcp"
  headersFrom: [{name: Mcp-Session-Id, secretKeyRef: {name: s, key: k}}]`, "set by the MCP transport and cannot be overridden"),
		Entry("token exchange and a per-caller Secret at once", `
transport: streamable-http
remote:
  url: "https://mcp.example.com/mcp"
  auth:
    tokenExchange: {tokenURL: "https://idp.example.com/token", audience: github, clientSecretRef: {name: c}}
    perCallerSecret: {key: token}`, "set one of tokenExchange"),
		Entry("token exchange over http to another host", `
transport: streamable-http
remote:
  url: "https://mcp.example.com/mcp"
  auth:
    tokenExchange: {tokenURL: "http://idp.example.com/token", audience: github, clientSecretRef: {name: c}}`, "tokenURL must be an absolute https:// URL"),
		Entry("token exchange without audience or resource", `
transport: streamable-http
remote:
  url: "https://mcp.example.com/mcp"
  auth:
    tokenExchange: {tokenURL: "https://idp.example.com/token", clientSecretRef: {name: c}}`, "tokenExchange needs audience or resource"),
		Entry("token exchange resource that is not a URI", `
transport: streamable-http
remote:
  url: "https://mcp.example.com/mcp"
  auth:
    tokenExchange: {tokenURL: "https://idp.example.com/token", resource: "github", clientSecretRef: {name: c}}`, "resource must be an absolute URI"),
		Entry("token exchange scope with a space", `
transport: streamable-http
remote:
  url: "https://mcp.example.com/mcp"
  auth:
    tokenExchange: {tokenURL: "https://idp.example.com/token", audience: a, scopes: ["repo read"], clientSecretRef: {name: c}}`, "spec.remote.auth.tokenExchange.scopes"),
		Entry("a shared Authorization header beside token exchange", `
transport: streamable-http
remote:
  url: "https://mcp.example.com/mcp"
  headersFrom: [{name: authorization, secretKeyRef: {name: s, key: k}}]
  auth:
    tokenExchange: {tokenURL: "https://idp.example.com/token", audience: github, clientSecretRef: {name: c}}`, "headersFrom may not set Authorization"),
		Entry("a shared header named as the per-caller Secret's", `
transport: streamable-http
remote:
  url: "https://mcp.example.com/mcp"
  headersFrom: [{name: x-api-key, secretKeyRef: {name: s, key: k}}]
  auth:
    perCallerSecret: {key: token, header: X-Api-Key}`, "headersFrom may not set Authorization, nor perCallerSecret's header"),
		Entry("a per-caller credential over http off loopback", `
transport: streamable-http
remote:
  url: "http://mcp.example.com/mcp"
  auth:
    perCallerSecret: {key: token}`, "url must be https://"),
		Entry("per-caller Secret in a header the transport owns", `
transport: streamable-http
remote:
  url: "https://mcp.example.com/mcp"
  auth:
    perCallerSecret: {key: token, header: Mcp-Session-Id}`, "set by the MCP transport and cannot be overridden"),
		// Enums.
		Entry("unknown transport", `
transport: websocket
workload: {image: x}`, `Unsupported value: "websocket"`),
		Entry("unknown egress", `
transport: streamable-http
workload: {image: x, network: {egress: Everywhere}}`, `Unsupported value: "Everywhere"`),
		Entry("unknown risk override", validWorkload+`
tools: {riskOverrides: [{tool: rm, risk: catastrophic}]}`, `Unsupported value: "catastrophic"`),
		Entry("unknown pinning", validWorkload+`
tools: {catalogPinning: Sometimes}`, `Unsupported value: "Sometimes"`),
		// Bounds and formats.
		Entry("port 0", `
transport: streamable-http
workload: {image: x, port: 0}`, "should be greater than or equal to 1"),
		Entry("port above 65535", `
transport: streamable-http
workload: {image: x, port: 70000}`, "should be less than or equal to 65535"),
		Entry("path without a leading slash", `
transport: streamable-http
workload: {image: x, path: mcp}`, "spec.workload.path"),
		Entry("empty image", `
transport: streamable-http
workload: {image: ""}`, "spec.workload.image"),
		Entry("image too long", fmt.Sprintf(`
transport: streamable-http
workload: {image: %q}`, strings.Repeat("a", 1025)), "Too long"),
		Entry("too many command items", fmt.Sprintf(`
transport: stdio
workload: {image: x, command: [%s]}`, strings.TrimSuffix(strings.Repeat(`"a",`, 65), ",")), "Too many"),
		Entry("runAsUser 0 (root)", `
transport: streamable-http
workload: {image: x, securityContext: {runAsUser: 0}}`, "should be greater than or equal to 1"),
		Entry("approvedDigest that is not a sha256", validWorkload+`
tools: {catalogPinning: Locked, approvedDigest: "md5:abc"}`, "spec.tools.approvedDigest"),
		Entry("a duration in words", validWorkload+`
probe: {interval: "five minutes"}`, "spec.probe.interval"),
		Entry("maxRestarts above 100", validWorkload+`
restartPolicy: {maxRestarts: 101}`, "should be less than or equal to 100"),
		Entry("too many exclude globs", validWorkload+fmt.Sprintf(`
tools: {exclude: [%s]}`, globs(129)), "Too many"),
		Entry("an unknown field", validWorkload+`
replicas: 3`, `unknown field "spec.replicas"`),
		// Pod Security: what the restricted standard would refuse is refused here.
		Entry("a hostPath volume", `
transport: streamable-http
workload: {image: x, volumes: [{name: host, hostPath: {path: /}}]}`, "server pods run under the restricted Pod Security Standard"),
		// Egress allow-list.
		Entry("an egress allow-list entry that is no CIDR", `
transport: streamable-http
workload: {image: x, network: {egressAllow: [{cidr: 203.0.113.7, ports: [{port: 443}]}]}}`, "cidr must be an IPv4 or IPv6 CIDR"),
		Entry("an egress CIDR with host bits set", `
transport: streamable-http
workload: {image: x, network: {egressAllow: [{cidr: 203.0.113.7/24, ports: [{port: 443}]}]}}`, "cidr must have no bits set after its prefix"),
		Entry("an egress allow-list entry without ports", `
transport: streamable-http
workload: {image: x, network: {egressAllow: [{cidr: 203.0.113.0/24, ports: []}]}}`, "spec.workload.network.egressAllow[0].ports"),
		Entry("an egress port above 65535", `
transport: streamable-http
workload: {image: x, network: {egressAllow: [{cidr: 203.0.113.0/24, ports: [{port: 70000}]}]}}`, "should be less than or equal to 65535"),
		Entry("an egress protocol other than TCP or UDP", `
transport: streamable-http
workload: {image: x, network: {egressAllow: [{cidr: 203.0.113.0/24, ports: [{port: 443, protocol: SCTP}]}]}}`, `Unsupported value: "SCTP"`),
	)

	It("accepts the volumes the restricted Pod Security Standard allows and an egress allow-list, defaulting its protocol to TCP", func() {
		name := uniqueName("restricted")
		Expect(create(object("MCPServer", name, `
transport: streamable-http
workload:
  image: x
  volumes:
    - {name: scratch, emptyDir: {}}
    - {name: config, configMap: {name: c}}
    - {name: creds, secret: {secretName: s}}
    - {name: token, projected: {sources: [{serviceAccountToken: {path: token, audience: api}}]}}
  network:
    egress: None
    egressAllow:
      - {cidr: 203.0.113.7/32, ports: [{port: 443}, {port: 53, protocol: UDP}]}
      - {cidr: "2001:db8::/32", ports: [{port: 443}]}`))).To(Succeed())
		var s mcpv1alpha1.MCPServer
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &s)).To(Succeed())
		allow := s.Spec.Workload.Network.EgressAllow
		Expect(allow).To(HaveLen(2))
		Expect(allow[0].Ports).To(Equal([]mcpv1alpha1.EgressPort{{Port: 443, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}}))
	})

	It("rejects a name with dots, which would make mcp.<server>.<tool> ambiguous", func() {
		expectRejected(create(object("MCPServer", "fs.v2", validWorkload)), "must be a DNS label")
	})
})

// globs returns n distinct quoted glob patterns, comma separated.
func globs(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("%q", fmt.Sprintf("tool-%d-*", i))
	}
	return strings.Join(items, ",")
}

const validPolicy = `
subjects: [{kind: ServiceAccount, name: agent, namespace: default}]
`

var _ = Describe("ToolPolicy validation", func() {
	It("accepts a policy with tool, resource and prompt rules and a CEL condition", func() {
		Expect(create(object("ToolPolicy", uniqueName("ok"), validPolicy+`
rules:
  - {tools: ["mcp.fs.*"], risks: [read], decision: allow}
  - {tools: ["mcp.fs.write_file"], decision: ask, when: "args.path.startsWith('/tmp/')"}
resources: [{servers: [fs], uris: ["file:///tmp/*"], decision: allow}]
prompts: [{prompts: ["mcp.fs.*"], decision: deny}]`))).To(Succeed())
	})

	It("accepts a policy of skill rules alone", func() {
		Expect(create(object("ToolPolicy", uniqueName("skills"), validPolicy+`
skills:
  - {skills: ["mcp.billing.acme.**"], decision: allow}
  - {skills: ["mcp.billing.acme.internal-*"], decision: deny}`))).To(Succeed())
	})

	It("accepts injection Flag and Block on tool and prompt rules and keeps them", func() {
		name := uniqueName("injection")
		Expect(create(object("ToolPolicy", name, validPolicy+`
rules:
  - {tools: ["mcp.fs.*"], decision: allow, injection: Block}
  - {tools: ["mcp.web.*"], decision: allow, injection: Flag}
prompts:
  - {prompts: ["mcp.fs.*"], decision: allow, injection: Block}
  - {prompts: ["mcp.web.*"], decision: allow, injection: Flag}`))).To(Succeed())
		var p mcpv1alpha1.ToolPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &p)).To(Succeed())
		Expect(p.Spec.Rules[0].Injection).To(Equal(mcpv1alpha1.InjectionBlock))
		Expect(p.Spec.Rules[1].Injection).To(Equal(mcpv1alpha1.InjectionFlag))
		Expect(p.Spec.Prompts[0].Injection).To(Equal(mcpv1alpha1.InjectionBlock))
		Expect(p.Spec.Prompts[1].Injection).To(Equal(mcpv1alpha1.InjectionFlag))
	})

	DescribeTable("rejects invalid policies with a message that says what to fix",
		func(specYAML, message string) {
			expectRejected(create(object("ToolPolicy", uniqueName("bad"), specYAML)), message)
		},
		Entry("no subjects", `
subjects: []
rules: [{tools: ["*"], decision: deny}]`, "spec.subjects"),
		Entry("a ServiceAccount without namespace", `
subjects: [{kind: ServiceAccount, name: agent}]
rules: [{tools: ["*"], decision: deny}]`, "a ServiceAccount subject needs its namespace"),
		Entry("a User with a namespace", `
subjects: [{kind: User, name: alice, namespace: default}]
rules: [{tools: ["*"], decision: deny}]`, "namespace is only for ServiceAccount subjects"),
		Entry("an unknown subject kind", `
subjects: [{kind: Robot, name: r2}]
rules: [{tools: ["*"], decision: deny}]`, `Unsupported value: "Robot"`),
		Entry("nothing to decide", validPolicy, "needs at least one of rules, resources, prompts or skills"),
		Entry("ask on a skill rule", validPolicy+`
skills: [{skills: ["mcp.billing.**"], decision: ask}]`, "a skill rule decides allow or deny, not ask"),
		Entry("a rule matching nothing named", validPolicy+`
rules: [{decision: allow}]`, "a rule needs tools, risks or both"),
		Entry("an unknown decision", validPolicy+`
rules: [{tools: ["*"], decision: maybe}]`, `Unsupported value: "maybe"`),
		Entry("an unknown risk", validPolicy+`
rules: [{tools: ["*"], risks: [scary], decision: deny}]`, `Unsupported value: "scary"`),
		Entry("a when condition on a resource rule", validPolicy+`
resources: [{servers: [fs], decision: allow, when: "true"}]`, `unknown field "spec.resources[0].when"`),
		Entry("a when condition on a prompt rule", validPolicy+`
prompts: [{prompts: ["*"], decision: allow, when: "true"}]`, `unknown field "spec.prompts[0].when"`),
		Entry("a resource rule without servers", validPolicy+`
resources: [{decision: allow}]`, "spec.resources[0].servers"),
		Entry("a CEL condition too long", validPolicy+fmt.Sprintf(`
rules: [{tools: ["*"], decision: allow, when: %q}]`, strings.Repeat("x", 4097)), "Too long"),
		Entry("a rate limit of zero", validPolicy+`
rules: [{tools: ["*"], decision: allow}]
rateLimit: {callsPerMinute: 0}`, "should be greater than or equal to 1"),
		Entry("an approval timeout of a day", validPolicy+`
rules: [{tools: ["*"], decision: ask}]
approval: {timeout: 24h}`, "approval timeout must be between 1s and 1h"),
		Entry("an unknown approval mode", validPolicy+`
rules: [{tools: ["*"], decision: ask}]
approval: {modes: [AllowForever]}`, `Unsupported value: "AllowForever"`),
		Entry("an unknown injection action on a tool rule", validPolicy+`
rules: [{tools: ["*"], decision: allow, injection: Warn}]`, `spec.rules[0].injection: Unsupported value: "Warn": supported values: "Flag", "Block"`),
		Entry("an injection action in the wrong case on a prompt rule", validPolicy+`
prompts: [{prompts: ["*"], decision: allow, injection: block}]`, `spec.prompts[0].injection: Unsupported value: "block": supported values: "Flag", "Block"`),
		Entry("injection on a resource rule", validPolicy+`
resources: [{servers: [fs], decision: allow, injection: Block}]`, `unknown field "spec.resources[0].injection"`),
		Entry("too many rules", validPolicy+fmt.Sprintf(`
rules: [%s]`, strings.TrimSuffix(strings.Repeat(`{tools: ["*"], decision: deny},`, 513), ",")), "Too many"),
	)
})
