package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Transport is how the bridge and the probe speak to a server.
// +kubebuilder:validation:Enum=stdio;streamable-http
type Transport string

const (
	// TransportStdio runs the server's command under the stdio adapter in its pod,
	// which serves it as Streamable HTTP.
	TransportStdio Transport = "stdio"
	// TransportStreamableHTTP is MCP's HTTP transport, served by the server itself.
	TransportStreamableHTTP Transport = "streamable-http"
)

// EgressPolicy says where a server pod may open connections to.
// +kubebuilder:validation:Enum=None;DNS;Cluster;Internet
type EgressPolicy string

const (
	// EgressNone allows no outgoing connection at all.
	EgressNone EgressPolicy = "None"
	// EgressDNS allows DNS lookups only.
	EgressDNS EgressPolicy = "DNS"
	// EgressCluster allows DNS and connections to addresses inside the cluster,
	// except other MCP server pods.
	EgressCluster EgressPolicy = "Cluster"
	// EgressInternet allows DNS and connections outside the cluster, except to
	// other MCP server pods.
	EgressInternet EgressPolicy = "Internet"
)

// CatalogPinning says whether a changed tool catalog is published.
// +kubebuilder:validation:Enum=Auto;Locked
type CatalogPinning string

const (
	// CatalogPinningAuto publishes every new catalog and emits CatalogChanged.
	CatalogPinningAuto CatalogPinning = "Auto"
	// CatalogPinningLocked publishes only the catalog whose digest is
	// spec.tools.approvedDigest.
	CatalogPinningLocked CatalogPinning = "Locked"
)

// RestartAnnotation on an MCPServer asks the controller to bring back a server
// that gave up after too many crashes. Any new value counts.
const RestartAnnotation = "mcp-operator.dev/restart"

// SleepAnnotation on an MCPServer puts a workload server to sleep by hand:
// its value is an RFC 3339 time, and the server sleeps when that time is
// newer than the last activity its activity Lease records (`kubectl mcp
// sleep` sets it to now). A later call or `kubectl mcp wake` wakes it.
const SleepAnnotation = "mcp-operator.dev/sleep"

// ActivityLeaseSuffix names a server's activity Lease: <server>-activity, in
// the server's namespace. Bridge replicas write its spec.renewTime when the
// server is used; the controller reads it to put the server to sleep and to
// wake it.
const ActivityLeaseSuffix = "-activity"

// ServerLabel is set on every object the controller creates for a server; its
// value is the MCPServer's name.
const ServerLabel = "mcp-operator.dev/server"

// MCPServer condition types (Ready is shared, see ConditionReady).
const (
	// ConditionAvailable is True when the server answers the probe.
	ConditionAvailable = "Available"
	// ConditionCatalogReady is True when a valid catalog is published in status.
	ConditionCatalogReady = "CatalogReady"
	// ConditionDegraded is True when the server works but something is wrong:
	// invalid tools left out, a truncated catalog, a refused catalog change.
	ConditionDegraded = "Degraded"
	// ConditionNameConflict is True when an older MCPServer in the bridge's
	// scope has the same name; this one's tools are not served.
	ConditionNameConflict = "NameConflict"
)

// MCPServer condition reasons. docs/mcpserver.md says what each means and
// what to do about it.
const (
	// ReasonServing: the catalog is published and the bridge serves it.
	ReasonServing = "Serving"
	// ReasonStarting: the pod is being created or has not answered yet.
	ReasonStarting = "Starting"
	// ReasonProbeFailed: the server did not answer the probe.
	ReasonProbeFailed = "ProbeFailed"
	// ReasonRestarting: the server crashed and waits for its backoff to end.
	ReasonRestarting = "Restarting"
	// ReasonPermanentlyFailed: the server crashed more often than
	// spec.restartPolicy.maxRestarts allows; it stays down until its spec
	// changes or the mcp-operator.dev/restart annotation is set.
	ReasonPermanentlyFailed = "PermanentlyFailed"
	// ReasonSuspended: spec.suspend is true.
	ReasonSuspended = "Suspended"
	// ReasonSleeping: the server had no activity for spec.workload.idle (or
	// was put to sleep by hand); its pod is gone, its catalog stays
	// published, and the next call wakes it.
	ReasonSleeping = "Sleeping"
	// ReasonWaking: a call (or `kubectl mcp wake`) woke a sleeping server;
	// its pod is starting and the catalog stays published.
	ReasonWaking = "Waking"
	// ReasonInvalidTools: some tools broke the naming or schema rules and were
	// left out.
	ReasonInvalidTools = "InvalidTools"
	// ReasonCatalogTruncated: the catalog has more tools than status lists.
	ReasonCatalogTruncated = "CatalogTruncated"
	// ReasonCatalogNotApproved: catalogPinning is Locked and the server's
	// catalog digest differs from approvedDigest.
	ReasonCatalogNotApproved = "CatalogNotApproved"
	// ReasonNameInUse: an older MCPServer in the bridge's scope has this name.
	ReasonNameInUse = "NameInUse"
	// ReasonCredentialsMissing: a Secret the server needs does not exist or
	// lacks the key.
	ReasonCredentialsMissing = "CredentialsMissing"
	// ReasonImagePullFailed: the kubelet cannot pull the server's image; the
	// message names the image and carries the container runtime's error.
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonContainerConfigError: the kubelet cannot create the server's
	// container from its spec, such as a Secret or ConfigMap (or a key of
	// one) that env or envFrom names and that does not exist.
	ReasonContainerConfigError = "ContainerConfigError"
	// ReasonUnschedulable: no node can take the server's pod; the message is
	// the scheduler's.
	ReasonUnschedulable = "Unschedulable"
	// ReasonReconcileError: the controller failed at a step (an API call);
	// it retries with backoff and the message says what it was doing.
	ReasonReconcileError = "ReconcileError"
)

// MCPServerSpec is the desired state of an MCP server: where it runs, how it is
// reached, how its tools are classified and what happens when it crashes.
//
// +kubebuilder:validation:XValidation:rule="has(self.workload) != has(self.remote)",message="exactly one of spec.workload (run the server in the cluster) or spec.remote (connect to a server elsewhere) must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.remote) || self.transport == 'streamable-http'",message="spec.remote servers are reached over streamable-http only; set spec.transport: streamable-http"
// +kubebuilder:validation:XValidation:rule="self.transport != 'stdio' || (has(self.workload) && has(self.workload.command) && size(self.workload.command) > 0)",message="spec.transport stdio needs spec.workload.command: the image's entrypoint cannot be read without pulling the image"
type MCPServerSpec struct {
	// transport is how the server speaks MCP: stdio (the server reads and writes
	// JSON-RPC on stdin/stdout; the operator's stdio adapter serves it over HTTP)
	// or streamable-http (the server listens on spec.workload.port itself).
	// +required
	Transport Transport `json:"transport"`

	// workload runs the server as a pod in this namespace. Exactly one of
	// workload and remote is set.
	// +optional
	Workload *Workload `json:"workload,omitempty"`

	// remote connects to a server that runs elsewhere. Exactly one of workload
	// and remote is set.
	// +optional
	Remote *Remote `json:"remote,omitempty"`

	// tools controls how the server's tools are classified and published.
	// +optional
	// +kubebuilder:default={}
	Tools ToolsSpec `json:"tools,omitzero"`

	// restartPolicy controls how a crashing server is restarted and when the
	// controller gives up on it.
	// +optional
	// +kubebuilder:default={}
	RestartPolicy RestartPolicy `json:"restartPolicy,omitzero"`

	// probe controls how the server's catalog is read.
	// +optional
	// +kubebuilder:default={}
	Probe ProbeSpec `json:"probe,omitzero"`

	// serverRequests says which requests of its own the server may send,
	// during a tool call, to the client of the agent that made the call: the
	// bridge relays them or answers the server with an error.
	// +optional
	// +kubebuilder:default={}
	ServerRequests ServerRequests `json:"serverRequests,omitzero"`

	// suspend shuts the server down: its tools are withdrawn at once and its
	// pod is deleted. Set it back to false to start the server again.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// Workload is a server that runs as a pod in the cluster.
type Workload struct {
	// image is the container image that holds the server.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// command replaces the image's entrypoint. Required for stdio servers: it is
	// what the stdio adapter starts.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command,omitempty"`

	// args are passed to the command.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`

	// env sets environment variables in the server's container. Values read
	// from Secrets are redacted from the server's output by the bridge.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`

	// envFrom sets environment variables from ConfigMaps and Secrets.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`

	// port the server (or, for stdio, the adapter) listens on.
	// +optional
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// path of the MCP endpoint on port.
	// +optional
	// +kubebuilder:default="/mcp"
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^/[A-Za-z0-9/._~-]*$`
	Path string `json:"path,omitempty"`

	// resources are the container's requests and limits; the limits are
	// enforced by the node's cgroups. Unset keys default to requests cpu 50m,
	// memory 64Mi and limits cpu 500m, memory 256Mi.
	// +optional
	// +kubebuilder:default={requests: {cpu: "50m", memory: "64Mi"}, limits: {cpu: "500m", memory: "256Mi"}}
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// serviceAccountName the pod runs as. Its token is not mounted unless a
	// volume asks for it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// network says what the server may connect to.
	// +optional
	// +kubebuilder:default={}
	Network NetworkSpec `json:"network,omitzero"`

	// nodeSelector constrains the nodes the pod may run on.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the pod run on tainted nodes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// volumes added to the pod, mounted with volumeMounts. Only the volume
	// types the restricted Pod Security Standard allows: configMap, csi,
	// downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected,
	// secret (a hostPath volume, for one, would let the server out of its pod).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(v, has(v.configMap) || has(v.csi) || has(v.downwardAPI) || has(v.emptyDir) || has(v.ephemeral) || has(v.persistentVolumeClaim) || has(v.projected) || has(v.secret))",message="server pods run under the restricted Pod Security Standard: a volume must be one of configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected or secret"
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// idle is how long the server may go without activity (a call, a list, a
	// read, an open agent session or subscription on any bridge replica)
	// before the controller removes its pod. The server then sleeps: Ready is
	// False with reason Sleeping, its catalog stays published, and the next
	// call wakes it. Unset: the server never sleeps on its own.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="idle must be at least 1s"
	Idle *metav1.Duration `json:"idle,omitempty"`

	// volumeMounts of the server's container. The root filesystem is read-only
	// unless securityContext says otherwise: mount an emptyDir where the server
	// writes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// securityContext loosens the hardened defaults where a server needs it.
	// The pod always runs as non-root, without privilege escalation, with all
	// capabilities dropped and the RuntimeDefault seccomp profile.
	// +optional
	SecurityContext *WorkloadSecurityContext `json:"securityContext,omitempty"`
}

// NetworkSpec is the network access of a server pod.
type NetworkSpec struct {
	// egress says where the server may connect: None, DNS (lookups only),
	// Cluster (in-cluster addresses) or Internet. Other MCP server pods are never
	// reachable.
	// +optional
	// +kubebuilder:default=DNS
	Egress EgressPolicy `json:"egress,omitempty"`

	// egressAllow lists further destinations the server may connect to, by
	// CIDR and port, on top of what egress allows: with egress None, exactly
	// these. Meant for addresses outside the cluster (a database, an API);
	// other MCP server pods stay unreachable whatever is listed here.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	EgressAllow []EgressRule `json:"egressAllow,omitempty"`
}

// EgressRule is one destination a server may connect to.
type EgressRule struct {
	// cidr is the destination's address range, e.g. 203.0.113.0/24, or
	// 203.0.113.7/32 for one address.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="cidr must be an IPv4 or IPv6 CIDR such as 203.0.113.0/24"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self) == cidr(self).masked()",message="cidr must have no bits set after its prefix: write the network address (e.g. 203.0.113.0/24, not 203.0.113.7/24)"
	CIDR string `json:"cidr"`

	// ports the server may connect to at cidr; at least one.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Ports []EgressPort `json:"ports"`
}

// EgressPort is a destination port and its protocol.
type EgressPort struct {
	// port number.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// protocol of the connection.
	// +optional
	// +kubebuilder:default=TCP
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// WorkloadSecurityContext holds the few security settings a server may change.
type WorkloadSecurityContext struct {
	// runAsUser is the UID the server runs as; it may not be 0.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	RunAsUser *int64 `json:"runAsUser,omitempty"`

	// runAsGroup is the GID the server runs as.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`

	// fsGroup owns the pod's volumes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	FSGroup *int64 `json:"fsGroup,omitempty"`

	// readOnlyRootFilesystem is true by default; set it to false for a server
	// that writes next to its own files.
	// +optional
	ReadOnlyRootFilesystem *bool `json:"readOnlyRootFilesystem,omitempty"`
}

// Remote is a server that runs outside the cluster (or outside the operator's
// control) and is reached over Streamable HTTP. Where the credential is each
// caller's own, the caller's header is the caller's alone (no shared
// header may take its place) and it never crosses the network in clear
// text.
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !(has(self.auth.tokenExchange) || has(self.auth.perCallerSecret)) || !has(self.headersFrom) || self.headersFrom.all(h, h.name.lowerAscii() != 'authorization' && !(has(self.auth.perCallerSecret) && has(self.auth.perCallerSecret.header) && h.name.lowerAscii() == self.auth.perCallerSecret.header.lowerAscii()))",message="headersFrom may not set Authorization, nor perCallerSecret's header, beside tokenExchange or perCallerSecret: that header carries each caller's own credential"
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !(has(self.auth.tokenExchange) || has(self.auth.perCallerSecret)) || !isURL(self.url) || url(self.url).getScheme() == 'https' || url(self.url).getHostname() in ['localhost', '127.0.0.1', '::1']",message="with tokenExchange or perCallerSecret, url must be https:// (http:// only on a loopback address): each caller's own credential is sent to it"
type Remote struct {
	// url of the server's MCP endpoint, http or https.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHost() != ''",message="url must be an absolute http:// or https:// URL"
	URL string `json:"url"`

	// auth holds the credentials presented to the server: one shared
	// token, or each caller's own (tokenExchange, perCallerSecret), and
	// TLS.
	// +optional
	Auth *RemoteAuth `json:"auth,omitempty"`

	// headersFrom adds HTTP headers whose values come from Secrets, such as API
	// keys. The values are redacted from the server's output by the bridge.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	HeadersFrom []HeaderFromSecret `json:"headersFrom,omitempty"`
}

// RemoteAuth holds a remote server's credentials. A caller's call carries
// one kind of credential: the shared bearerTokenSecretRef (every caller
// alike), an exchanged token (tokenExchange) or the caller's own Secret
// (perCallerSecret). With tokenExchange or perCallerSecret,
// bearerTokenSecretRef is only the operator's own credential: the
// controller's probe and the bridge's catalog listings and resource
// subscriptions carry it, a caller's call never does.
// +kubebuilder:validation:XValidation:rule="!(has(self.tokenExchange) && has(self.perCallerSecret))",message="set one of tokenExchange (each caller's token exchanged) or perCallerSecret (each caller's own Secret), not both"
type RemoteAuth struct {
	// bearerTokenSecretRef selects a Secret key whose value is sent as
	// "Authorization: Bearer <value>": on every call when neither
	// tokenExchange nor perCallerSecret is set, else on the operator's own
	// requests only.
	// +optional
	BearerTokenSecretRef *SecretKeySelector `json:"bearerTokenSecretRef,omitempty"`

	// tokenExchange has the bridge exchange each caller's own bearer token
	// (RFC 8693) for a token meant for this server, and send that instead.
	// +optional
	TokenExchange *TokenExchange `json:"tokenExchange,omitempty"`

	// perCallerSecret has the bridge send each caller's own credential,
	// read from a Secret of the caller's in the server's namespace. A caller
	// without one is refused.
	// +optional
	PerCallerSecret *PerCallerSecret `json:"perCallerSecret,omitempty"`

	// tlsSecretRef names a Secret with ca.crt (the CA that signed the server's
	// certificate) and, for mutual TLS, tls.crt and tls.key.
	// +optional
	TLSSecretRef *LocalSecretReference `json:"tlsSecretRef,omitempty"`
}

// TokenExchange is an OAuth 2.0 token exchange (RFC 8693): the bridge
// posts the caller's token as the subject_token to tokenURL, authenticated
// as the client in clientSecretRef, and sends the access token it gets to
// the server as "Authorization: Bearer <token>".
// +kubebuilder:validation:XValidation:rule="has(self.audience) || has(self.resource)",message="tokenExchange needs audience or resource (or both): what the exchanged token is for"
type TokenExchange struct {
	// tokenURL is the token endpoint of the authorization server: https, or
	// http on a loopback address only.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getHost() != '' && (url(self).getScheme() == 'https' || (url(self).getScheme() == 'http' && url(self).getHostname() in ['localhost', '127.0.0.1', '::1']))",message="tokenURL must be an absolute https:// URL (http:// only on a loopback address)"
	TokenURL string `json:"tokenURL"`

	// audience is the exchange's audience parameter: the logical name of the
	// server the token is for.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Audience string `json:"audience,omitempty"`

	// resource is the exchange's resource parameter: the server's URI
	// (RFC 8707).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getHost() != ''",message="resource must be an absolute URI"
	Resource string `json:"resource,omitempty"`

	// scopes asked for in the exchange.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[!#-\[\]-~]+$`
	Scopes []string `json:"scopes,omitempty"`

	// clientSecretRef names the Secret of the bridge's own OAuth client: its
	// keys client_id and client_secret, sent with HTTP Basic authentication.
	// +required
	ClientSecretRef LocalSecretReference `json:"clientSecretRef"`

	// subjectTokenType is the type of the caller's token
	// (urn:ietf:params:oauth:token-type:access_token by default; a
	// ServiceAccount token may be named urn:ietf:params:oauth:token-type:jwt).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^urn:[A-Za-z0-9:._-]+$`
	SubjectTokenType string `json:"subjectTokenType,omitempty"`
}

// PerCallerSecret finds each caller's own Secret in the server's namespace:
// the Secret labelled mcp-operator.dev/caller with the caller's label value
// (the first 40 hex digits of the SHA-256 of the caller's user name, as the
// bridge names it, e.g. oidc:alice@example.com), whose annotation
// mcp-operator.dev/caller-name holds that exact user name.
type PerCallerSecret struct {
	// key within the caller's Secret whose value is sent.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`

	// header the value is sent in, as it is. Without it the value is sent
	// as "Authorization: Bearer <value>".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +kubebuilder:validation:XValidation:rule="!(self.lowerAscii() in ['host', 'content-length', 'content-type', 'mcp-session-id', 'mcp-protocol-version', 'transfer-encoding', 'connection'])",message="this header is set by the MCP transport and cannot be overridden"
	Header string `json:"header,omitempty"`
}

// Labels and annotations of a caller's own Secret (PerCallerSecret).
const (
	// CallerLabel holds CallerLabelValue of the caller's user name.
	CallerLabel = "mcp-operator.dev/caller"
	// CallerNameAnnotation holds the caller's exact user name: the label
	// is a digest, and the bridge checks the name it stands for.
	CallerNameAnnotation = "mcp-operator.dev/caller-name"
)

// HeaderFromSecret is one HTTP header whose value is read from a Secret.
type HeaderFromSecret struct {
	// name of the HTTP header.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +kubebuilder:validation:XValidation:rule="!(self.lowerAscii() in ['host', 'content-length', 'content-type', 'mcp-session-id', 'mcp-protocol-version', 'transfer-encoding', 'connection'])",message="this header is set by the MCP transport and cannot be overridden"
	Name string `json:"name"`

	// secretKeyRef selects the header's value.
	// +required
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// ToolsSpec controls how a server's tools are classified and published.
// +kubebuilder:validation:XValidation:rule="!has(self.catalogPinning) || self.catalogPinning != 'Locked' || has(self.approvedDigest)",message="catalogPinning Locked needs approvedDigest: copy status.catalogDigest of the catalog you approved"
type ToolsSpec struct {
	// riskOverrides set the risk of tools by their upstream name. They win over
	// the server's annotations.
	// +optional
	// +listType=map
	// +listMapKey=tool
	// +kubebuilder:validation:MaxItems=1024
	RiskOverrides []RiskOverride `json:"riskOverrides,omitempty"`

	// exclude leaves out tools whose upstream name matches one of these globs
	// (`*` matches any run of characters, `?` one character).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Exclude []string `json:"exclude,omitempty"`

	// trustAnnotations lets the server's own hints lower a tool's risk
	// (readOnlyHint makes a tool read). Without it, hints may only raise risk.
	// +optional
	TrustAnnotations bool `json:"trustAnnotations,omitempty"`

	// catalogPinning is Auto (publish every catalog change, with a
	// CatalogChanged event) or Locked (serve only the catalog whose digest is
	// approvedDigest).
	// +optional
	// +kubebuilder:default=Auto
	CatalogPinning CatalogPinning `json:"catalogPinning,omitempty"`

	// approvedDigest is the catalog digest ("sha256:" and 64 hex digits) served
	// when catalogPinning is Locked.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +kubebuilder:validation:MaxLength=71
	ApprovedDigest string `json:"approvedDigest,omitempty"`
}

// Relay is whether the bridge passes one kind of server request on to the
// agent's client.
// +kubebuilder:validation:Enum=Relay;Refuse
type Relay string

const (
	// RelayAllowed passes the request to the agent's client, marked with the
	// server and tool it comes from, and its answer back to the server.
	RelayAllowed Relay = "Relay"
	// RelayRefused answers the server with an error; the agent never sees
	// the request.
	RelayRefused Relay = "Refuse"
)

// ServerRequests are the server's requests to the agent's client. The bridge
// relays one only while it serves a call of that agent (never to anyone
// else), only when the agent's client declared the capability, and records
// each in the audit stream (mcp.server_request).
type ServerRequests struct {
	// elicitation: the server asks the agent's user for input
	// (elicitation/create, form or URL mode). The user sees which server
	// asks and may decline. Relay (the default) or Refuse.
	// +optional
	// +kubebuilder:default=Relay
	Elicitation Relay `json:"elicitation,omitempty"`

	// sampling: the server asks the agent's model for a completion
	// (sampling/createMessage). It spends the agent's model budget and puts
	// the server's text before the model, so it is refused unless set to
	// Relay.
	// +optional
	// +kubebuilder:default=Refuse
	Sampling Relay `json:"sampling,omitempty"`
}

// Relays says whether requests of method are relayed. Unset fields mean
// their defaults, for objects that did not pass through the API server's
// defaulting.
func (r ServerRequests) Relays(method string) bool {
	switch method {
	case "elicitation/create":
		return r.Elicitation != RelayRefused
	case "sampling/createMessage":
		return r.Sampling == RelayAllowed
	}
	return false
}

// ClientCapabilities are the client capabilities that the bridge declares to
// the server, and the controller's probe too (a server may offer tools only
// to clients that declare them, and the probe must see the catalog the
// bridge will see).
func (r ServerRequests) ClientCapabilities() map[string]any {
	caps := map[string]any{}
	if r.Relays("elicitation/create") {
		caps["elicitation"] = map[string]any{"form": map[string]any{}, "url": map[string]any{}}
	}
	if r.Relays("sampling/createMessage") {
		caps["sampling"] = map[string]any{}
	}
	return caps
}

// RiskOverride sets the risk of one tool.
type RiskOverride struct {
	// tool is the upstream tool name, as the server lists it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Tool string `json:"tool"`

	// risk the tool is given.
	// +required
	Risk Risk `json:"risk"`
}

// RestartPolicy says how the controller restarts a crashing server and when it
// gives up.
// +kubebuilder:validation:XValidation:rule="!has(self.backoffBase) || !has(self.backoffCap) || duration(self.backoffBase) <= duration(self.backoffCap)",message="backoffBase must not exceed backoffCap"
type RestartPolicy struct {
	// enabled restarts crashed servers; false leaves a crashed server down.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// maxRestarts is how many restarts in a row the controller makes; the next
	// crash marks the server PermanentlyFailed.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxRestarts *int32 `json:"maxRestarts,omitempty"`

	// backoffBase is the wait before the first restart; each further restart
	// waits twice as long, up to backoffCap.
	// +optional
	// +kubebuilder:default="500ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="backoffBase must be positive"
	BackoffBase metav1.Duration `json:"backoffBase,omitzero"`

	// backoffCap is the longest wait between restarts.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('1h')",message="backoffCap must be at most 1h"
	BackoffCap metav1.Duration `json:"backoffCap,omitzero"`

	// stableAfter is how long a server must stay up for its consecutive crash
	// count to start over.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="stableAfter must be at least 1s"
	StableAfter metav1.Duration `json:"stableAfter,omitzero"`
}

// ProbeSpec controls how the server's catalog is read.
type ProbeSpec struct {
	// timeout of one probe (connect, handshake and every list call together).
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('5m')",message="probe timeout must be between 100ms and 5m"
	Timeout metav1.Duration `json:"timeout,omitzero"`

	// interval between probes of a running server. Each server is probed at
	// its own point of the interval, so servers created together are not
	// probed together. A failed probe counts as a crash.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s') && duration(self) <= duration('24h')",message="probe interval must be between 5s and 24h"
	Interval metav1.Duration `json:"interval,omitzero"`
}

// MCPServerStatus is what the controller observed of the server.
type MCPServerStatus struct {
	// conditions: Ready, Available, CatalogReady, Degraded and NameConflict.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// endpoint is where the bridge reaches the server.
	// +optional
	Endpoint *Endpoint `json:"endpoint,omitempty"`

	// serverInfo is what the server said about itself in the handshake.
	// +optional
	ServerInfo *ServerInfo `json:"serverInfo,omitempty"`

	// capabilities the server advertised.
	// +optional
	Capabilities *ServerCapabilities `json:"capabilities,omitempty"`

	// tools is the published catalog, sorted by name. At most 1000 are listed;
	// toolCount has the full number and Degraded says when the list is cut.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Tools []ToolStatus `json:"tools,omitempty"`

	// toolCount is the number of tools in the published catalog.
	// +optional
	ToolCount int32 `json:"toolCount,omitempty"`

	// resourceCount is the number of resources the server listed.
	// +optional
	ResourceCount int32 `json:"resourceCount,omitempty"`

	// prompts the server offers, sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Prompts []PromptStatus `json:"prompts,omitempty"`

	// skills the server serves (the skills extension), sorted by name. The
	// bridge serves a skill only while its live entry has this digest.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Skills []SkillStatus `json:"skills,omitempty"`

	// catalogDigest is the sha256 of the canonical published catalog: its
	// tools and, when the server serves skills, its skills.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	CatalogDigest string `json:"catalogDigest,omitempty"`

	// restarts counts the server's crashes and restarts.
	// +optional
	Restarts RestartStatus `json:"restarts,omitzero"`

	// lastProbeTime is when a probe last succeeded, as of the last status
	// write: it is refreshed with any other change of status and otherwise
	// at most once an hour, so an idle server costs no writes. The exact
	// time is the controller's metric
	// mcp_operator_server_last_probe_success_timestamp_seconds.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`

	// sleepingSince is when the server fell asleep; unset while it is awake.
	// +optional
	SleepingSince *metav1.Time `json:"sleepingSince,omitempty"`
}

// Endpoint is where the bridge reaches a server.
type Endpoint struct {
	// url of the server's MCP endpoint: the pod's IP for workloads, so a
	// restart is seen as a new endpoint; spec.remote.url for remote servers.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url,omitempty"`

	// podName is the pod that serves url; empty for remote servers.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName,omitempty"`

	// podUID is the UID of that pod: a pod deleted and replaced keeps its
	// name (the name is the server's incarnation and spec), not its UID.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	PodUID string `json:"podUID,omitempty"`
}

// ServerInfo is the server's self-description.
type ServerInfo struct {
	// name the server reported.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// version the server reported.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`

	// protocolVersion negotiated with the server, such as 2025-11-25.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	ProtocolVersion string `json:"protocolVersion,omitempty"`
}

// ServerCapabilities are the MCP capabilities a server advertised.
type ServerCapabilities struct {
	// tools: the server lists and runs tools.
	// +optional
	Tools bool `json:"tools,omitempty"`
	// toolsListChanged: the server notifies when its tool list changes.
	// +optional
	ToolsListChanged bool `json:"toolsListChanged,omitempty"`
	// resources: the server lists and reads resources.
	// +optional
	Resources bool `json:"resources,omitempty"`
	// resourcesSubscribe: clients may subscribe to resource updates.
	// +optional
	ResourcesSubscribe bool `json:"resourcesSubscribe,omitempty"`
	// prompts: the server lists and expands prompts.
	// +optional
	Prompts bool `json:"prompts,omitempty"`
	// skills: the server serves skills (io.modelcontextprotocol/skills).
	// +optional
	Skills bool `json:"skills,omitempty"`
	// logging: the server sends log messages.
	// +optional
	Logging bool `json:"logging,omitempty"`
	// completions: the server completes arguments.
	// +optional
	Completions bool `json:"completions,omitempty"`
}

// ToolFlag marks something the probe found suspicious about a tool.
// +kubebuilder:validation:Enum=injectionSuspect;contradictoryHints
type ToolFlag string

const (
	// ToolFlagInjectionSuspect means the tool's description looks like an
	// attempt to instruct the agent (prompt injection).
	ToolFlagInjectionSuspect ToolFlag = "injectionSuspect"
	// ToolFlagContradictoryHints means the tool's annotations say both
	// readOnlyHint and destructiveHint; it is classified destructive, the most
	// harmful reading.
	ToolFlagContradictoryHints ToolFlag = "contradictoryHints"
)

// ToolStatus is one published tool.
type ToolStatus struct {
	// name is the namespaced name agents and policies use: mcp.<server>.<tool>.
	// +required
	// +kubebuilder:validation:MaxLength=512
	Name string `json:"name"`

	// upstreamName is the tool's name on the server.
	// +required
	// +kubebuilder:validation:MaxLength=128
	UpstreamName string `json:"upstreamName"`

	// title is the tool's human-readable title.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Title string `json:"title,omitempty"`

	// description, cut to 512 characters. Untrusted text from the server.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Description string `json:"description,omitempty"`

	// risk is the tool's classification after overrides and annotations.
	// +required
	Risk Risk `json:"risk"`

	// annotations are the hints the server gave.
	// +optional
	Annotations *ToolAnnotations `json:"annotations,omitempty"`

	// schemaDigest is the sha256 of the tool's canonical definition; the
	// bridge refuses a tool whose live definition no longer matches it.
	// +required
	// +kubebuilder:validation:MaxLength=71
	SchemaDigest string `json:"schemaDigest"`

	// flags are what the probe found suspicious.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	Flags []ToolFlag `json:"flags,omitempty"`

	// arguments are the top-level properties of the tool's input schema, by
	// name, with what their schema says they hold. ToolPolicy lints read
	// them (a when condition on an argument no tool has; a prefix test on a
	// path or URL). A tool with more than 64 lists the first 64 by name, and
	// the status lists at most 4000 in all (tools in name order), so that a
	// server cannot make its status too large to store: every tool from the
	// first that does not fit lists none. A tool also lists none when a name
	// is not 1 to 64 of A-Z, a-z, 0-9, '_', '.', '-' (or held a secret), or
	// when its schema may admit arguments it does not list
	// (additionalProperties, patternProperties, allOf, anyOf, oneOf, $ref and
	// the like); none means not known.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Arguments []ToolArgument `json:"arguments,omitempty"`
}

// ArgumentHolds is what a tool argument's schema says the argument holds.
// +kubebuilder:validation:Enum=Path;URL
type ArgumentHolds string

const (
	// HoldsPath is a file system path (by its name, format or description).
	HoldsPath ArgumentHolds = "Path"
	// HoldsURL is a URL or URI.
	HoldsURL ArgumentHolds = "URL"
)

// ToolArgument is one top-level property of a tool's input schema.
type ToolArgument struct {
	// name of the property, cut to 64 characters.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`

	// holds says the argument is a string holding a Path or a URL, as its
	// name, JSON Schema format or description says; unset when it says
	// neither.
	// +optional
	Holds ArgumentHolds `json:"holds,omitempty"`
}

// ToolAnnotations are a server's hints about a tool. They are untrusted unless
// spec.tools.trustAnnotations is set.
type ToolAnnotations struct {
	// readOnlyHint: the tool does not change its environment.
	// +optional
	ReadOnlyHint *bool `json:"readOnlyHint,omitempty"`
	// destructiveHint: the tool may delete or overwrite data.
	// +optional
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	// idempotentHint: calling the tool twice has no further effect.
	// +optional
	IdempotentHint *bool `json:"idempotentHint,omitempty"`
	// openWorldHint: the tool reaches outside systems.
	// +optional
	OpenWorldHint *bool `json:"openWorldHint,omitempty"`
}

// PromptStatus is one prompt the server offers.
type PromptStatus struct {
	// name is the namespaced prompt name: mcp.<server>.<prompt>.
	// +required
	// +kubebuilder:validation:MaxLength=512
	Name string `json:"name"`

	// arguments the prompt takes.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Arguments []PromptArgument `json:"arguments,omitempty"`
}

// SkillStatus is one skill the server serves.
type SkillStatus struct {
	// name is the namespaced skill name: mcp.<server>.<skill path>, the
	// path being that of the skill's URI with '.' for '/' (a skill at
	// skill://acme/billing/refunds/SKILL.md is mcp.<server>.acme.billing.refunds).
	// +required
	// +kubebuilder:validation:MaxLength=512
	Name string `json:"name"`

	// uri of the skill's SKILL.md.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	URI string `json:"uri"`

	// description from the skill's frontmatter, cut to 512 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Description string `json:"description,omitempty"`

	// files is the number of files the skill's manifest lists.
	// +optional
	Files int32 `json:"files,omitempty"`

	// bytes is the total size of the skill's files.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`

	// digest is the sha256 of the skill's canonical entry: its frontmatter
	// and every file's URI, sha256 and size.
	// +required
	// +kubebuilder:validation:MaxLength=71
	Digest string `json:"digest"`
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	// name of the argument.
	// +required
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`

	// required arguments must be given.
	// +optional
	Required bool `json:"required,omitempty"`
}

// RestartStatus counts a server's crashes and restarts. It lives in status so
// it survives a controller restart.
type RestartStatus struct {
	// consecutive crashes since the server was last stable.
	// +optional
	Consecutive int32 `json:"consecutive,omitempty"`

	// total crashes seen.
	// +optional
	Total int32 `json:"total,omitempty"`

	// lastExitReason says how the last crash happened, such as OOMKilled,
	// Error (exit code 1) or ProbeFailed.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastExitReason string `json:"lastExitReason,omitempty"`

	// lastCrashTime is when the last crash was seen.
	// +optional
	LastCrashTime *metav1.MicroTime `json:"lastCrashTime,omitempty"`

	// nextRestartTime is when the next pod will be started. Microsecond
	// precision: backoffs start at fractions of a second.
	// +optional
	NextRestartTime *metav1.MicroTime `json:"nextRestartTime,omitempty"`

	// failedGeneration is the generation of the spec under which the server
	// gave up (PermanentlyFailed); a spec change brings the server back.
	// +optional
	FailedGeneration int64 `json:"failedGeneration,omitempty"`

	// restartRequest is the value the mcp-operator.dev/restart annotation had
	// when the server gave up; setting a different value brings it back.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	RestartRequest string `json:"restartRequest,omitempty"`

	// probeFailures counts the probes in a row the running pod failed; at 3
	// the server counts as crashed. In status, so a new leader goes on
	// counting where the old one stopped.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ProbeFailures int32 `json:"probeFailures,omitempty"`
}

// MCPServer runs or connects to one MCP server and publishes its tool catalog.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcps,categories=mcp
// +kubebuilder:printcolumn:name="Transport",type=string,JSONPath=`.spec.transport`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Asleep",type=date,JSONPath=`.status.sleepingSince`
// +kubebuilder:printcolumn:name="Tools",type=integer,JSONPath=`.status.toolCount`
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts.total`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",message="an MCPServer's name must be a DNS label (lowercase letters, digits and '-', at most 63 characters, no dots): it is the <server> segment of mcp.<server>.<tool>"
type MCPServer struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired server.
	// +required
	Spec MCPServerSpec `json:"spec"`

	// status is what the controller observed.
	// +optional
	Status MCPServerStatus `json:"status,omitzero"`
}

// MCPServerList is a list of MCPServers.
// +kubebuilder:object:root=true
type MCPServerList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []MCPServer `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MCPServer{}, &MCPServerList{})
}
