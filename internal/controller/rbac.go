package controller

// Permissions the controller needs whatever reconcilers it runs: lifecycle
// Events on the objects it manages (crashes, restarts, shutdowns) and leader
// election's events.
// Each reconciler adds its own markers beside its code; `make manifests`
// collects them all into config/rbac/role.yaml (ClusterRole
// mcp-operator-manager), and `make chart` copies the rules into the chart.
// The leader election Lease lives in the controller's own namespace, so its
// Role is config/rbac/leader_election_role.yaml, not a cluster-wide marker.

// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
