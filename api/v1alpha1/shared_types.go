package v1alpha1

// Risk is how much harm a tool can do. The permission engine never resolves a
// destructive tool to allow: at most it asks.
// +kubebuilder:validation:Enum=read;write;network;destructive
type Risk string

const (
	// RiskRead tools only read data.
	RiskRead Risk = "read"
	// RiskWrite tools change data they own.
	RiskWrite Risk = "write"
	// RiskNetwork tools reach the outside world; the default for every MCP tool.
	RiskNetwork Risk = "network"
	// RiskDestructive tools may delete or overwrite data; never run unasked.
	RiskDestructive Risk = "destructive"
)

// Decision is what a policy rule says about a request.
// +kubebuilder:validation:Enum=allow;deny;ask
type Decision string

const (
	// DecisionAllow lets the request through.
	DecisionAllow Decision = "allow"
	// DecisionDeny refuses the request.
	DecisionDeny Decision = "deny"
	// DecisionAsk asks the caller's client for approval first.
	DecisionAsk Decision = "ask"
)

// SecretKeySelector names one key of a Secret in the object's own namespace.
type SecretKeySelector struct {
	// name of the Secret, in the namespace of the object that refers to it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key within the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// LocalSecretReference names a Secret in the object's own namespace.
type LocalSecretReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Condition types shared by both kinds.
const (
	// ConditionReady is True when the object is fully usable: for an MCPServer,
	// its catalog is served by the bridge; for a ToolPolicy, it compiled.
	ConditionReady = "Ready"
)
