package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// The plugin is tested as users run it: a kubeconfig per user, each with
// its own client certificate signed by the API server's CA (so the API
// server authenticates alice as alice), against a real API server running
// the shipped admission policy.
var cluster = struct {
	testenv.Shared
	admin  client.Client
	config map[string]string // user → kubeconfig path
	dir    string
}{}

const (
	ns        = "tools"
	agentUser = "system:serviceaccount:agents:planner"
)

func TestMain(m *testing.M) {
	cluster.Setup = setupCluster
	code := m.Run()
	cluster.Stop()
	if cluster.dir != "" {
		_ = os.RemoveAll(cluster.dir)
	}
	os.Exit(code)
}

func start(t *testing.T) {
	t.Helper()
	if _, err := cluster.Start(); err != nil {
		t.Fatalf("while starting envtest: %v", err)
	}
}

func setupCluster(env *envtest.Environment, cfg *rest.Config) error {
	ctx := context.Background()
	admin, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	cluster.admin = admin
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	if err := testenv.InstallAdmissionPolicies(ctx, cfg); err != nil {
		return err
	}
	// Who may decide is RBAC: the on-call group may read and update
	// ToolApprovals, and so, here, may the agent (only the admission
	// policy keeps it from approving itself).
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp-approver"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"toolapprovals"}, Verbs: []string{"get", "list", "watch", "update"}},
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"toolpolicies", "mcpservers"}, Verbs: []string{"get", "list"}},
		},
	}
	if err := admin.Create(ctx, role); err != nil {
		return err
	}
	if err := admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp-approvers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "on-call"}},
	}); err != nil {
		return err
	}
	// Operators on call may put servers to sleep and wake them: patch the
	// MCPServer (the sleep annotation) and its activity Lease.
	sleeper := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp-sleeper"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"mcpservers"}, Verbs: []string{"get", "patch"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "patch"}},
		},
	}
	if err := admin.Create(ctx, sleeper); err != nil {
		return err
	}
	if err := admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp-sleepers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sleeper.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "on-call"}},
	}); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "kubectl-mcp-test")
	if err != nil {
		return err
	}
	cluster.dir = dir
	cluster.config = map[string]string{}
	for _, user := range []string{"alice", "bob", agentUser} {
		u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"on-call"}}, cfg)
		if err != nil {
			return err
		}
		data, err := u.KubeConfig()
		if err != nil {
			return err
		}
		path := filepath.Join(dir, strings.ReplaceAll(user, ":", "_")+".kubeconfig")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
		cluster.config[user] = path
	}
	return nil
}

// kubectlMCP runs the plugin as user and returns its exit code and output.
func kubectlMCP(t *testing.T, user string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--kubeconfig", cluster.config[user], "-n", ns)
	code := run(args, &out, &errOut)
	return code, out.String() + errOut.String()
}

// pending creates a ToolApproval as the bridge does.
func pending(t *testing.T, modes ...v1alpha1.ApprovalMode) *v1alpha1.ToolApproval {
	t.Helper()
	if len(modes) == 0 {
		modes = []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}
	}
	a := &v1alpha1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "fs-"},
		Spec: v1alpha1.ToolApprovalSpec{Request: v1alpha1.ApprovalRequest{
			Requester: v1alpha1.ApprovalRequester{Username: agentUser}, Method: "tools/call", Server: "fs",
			Target: "mcp.fs.write_file", ArgumentsPreview: `{"path": "/data/report.txt"}`, Risk: v1alpha1.RiskDestructive,
			Modes: modes, ExpiresAt: metav1.Time{Time: time.Now().Add(10 * time.Minute)},
		}},
	}
	ctx := context.Background()
	if err := cluster.admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Status.Phase = v1alpha1.ApprovalPending
	if err := cluster.admin.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	return a
}

func decision(t *testing.T, a *v1alpha1.ToolApproval) *v1alpha1.ApprovalDecision {
	t.Helper()
	var got v1alpha1.ToolApproval
	if err := cluster.admin.Get(context.Background(), client.ObjectKeyFromObject(a), &got); err != nil {
		t.Fatal(err)
	}
	return got.Spec.Decision
}

func TestApprovalsListsWhatWaits(t *testing.T) {
	start(t)
	a := pending(t)
	code, out := kubectlMCP(t, "alice", "approvals")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{"REQUESTER", "EXPIRES IN", a.Name, agentUser, "mcp.fs.write_file", `{"path": "/data/report.txt"}`, "destructive", "Pending"} {
		if !strings.Contains(out, want) {
			t.Errorf("approvals output lacks %q:\n%s", want, out)
		}
	}
}

func TestApproveUnderTheCallersOwnName(t *testing.T) {
	start(t)
	a := pending(t)
	code, out := kubectlMCP(t, "alice", "approve", a.Name, "--comment", "checked the path")
	if code != 0 || !strings.Contains(out, "approved (AllowOnce) by alice") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if d := decision(t, a); d == nil || d.Decider != "alice" || d.Verdict != v1alpha1.VerdictAllowOnce || d.Comment != "checked the path" {
		t.Errorf("decision = %+v", d)
	}

	code, out = kubectlMCP(t, "bob", "deny", a.Name)
	if code == 0 || !strings.Contains(out, "decided already: AllowOnce by alice") {
		t.Errorf("a second decision: exit %d: %s", code, out)
	}
	if code, out := kubectlMCP(t, "alice", "approvals"); strings.Contains(out, a.Name) {
		t.Errorf("a decided approval is still listed as waiting (exit %d):\n%s", code, out)
	}
	if code, out := kubectlMCP(t, "alice", "approvals", "--all"); !strings.Contains(out, a.Name) {
		t.Errorf("--all does not list the decided approval (exit %d):\n%s", code, out)
	}
}

func TestDeny(t *testing.T) {
	start(t)
	a := pending(t)
	code, out := kubectlMCP(t, "bob", "deny", a.Name, "--comment", "not on a Friday")
	if code != 0 || !strings.Contains(out, "denied by bob") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if d := decision(t, a); d == nil || d.Verdict != v1alpha1.VerdictDeny || d.Decider != "bob" {
		t.Errorf("decision = %+v", d)
	}
}

func TestTheRequesterCannotApproveItself(t *testing.T) {
	start(t)
	a := pending(t)
	code, out := kubectlMCP(t, agentUser, "approve", a.Name)
	if code == 0 || !strings.Contains(out, "nobody decides their own request") {
		t.Fatalf("the requesting ServiceAccount's own approval: exit %d: %s", code, out)
	}
	if d := decision(t, a); d != nil {
		t.Errorf("decision = %+v, want none", d)
	}
}

func TestSessionApprovalOnlyWhereOffered(t *testing.T) {
	start(t)
	once := pending(t)
	code, out := kubectlMCP(t, "alice", "approve", once.Name, "--session")
	if code == 0 || !strings.Contains(out, "does not offer approval for the session") {
		t.Errorf("exit %d: %s", code, out)
	}
	both := pending(t, v1alpha1.ApprovalAllowOnce, v1alpha1.ApprovalAllowSession)
	if code, out := kubectlMCP(t, "alice", "approve", both.Name, "--session"); code != 0 || !strings.Contains(out, "with any arguments") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if d := decision(t, both); d == nil || d.Verdict != v1alpha1.VerdictAllowSession {
		t.Errorf("decision = %+v, want AllowSession", d)
	}
}

func TestBadInvocationsSayWhatIsWrong(t *testing.T) {
	start(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"approve"}, "give the name of one ToolApproval"},
		{[]string{"approve", "no-such-approval"}, "not found"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"sleep"}, "give the name of one MCPServer"},
		{[]string{"wake", "no-such-server"}, "not found"},
		{[]string{"can-i", "mcp.fs.read_file"}, "--as is required"},
		{[]string{"can-i", "read_file", "--as", "x"}, "want mcp.<server>.<tool>"},
		{[]string{"can-i", "mcp.fs.read_file", "--as", "x", "--args", "[1]"}, "--args must be a JSON object"},
	} {
		code, out := kubectlMCP(t, "alice", c.args...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, output %q, want an error saying %q", c.args, code, out, c.want)
		}
	}
}

func TestCanIAnswersFromThePolicyEngine(t *testing.T) {
	start(t)
	ctx := context.Background()
	server := &v1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fs"},
		Spec:       v1alpha1.MCPServerSpec{Transport: v1alpha1.TransportStreamableHTTP, Remote: &v1alpha1.Remote{URL: "https://fs.example/mcp"}},
	}
	if err := cluster.admin.Create(ctx, server); err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("0", 64)
	server.Status.Tools = []v1alpha1.ToolStatus{
		{Name: "mcp.fs.read_file", UpstreamName: "read_file", Risk: v1alpha1.RiskRead, SchemaDigest: digest},
		{Name: "mcp.fs.write_file", UpstreamName: "write_file", Risk: v1alpha1.RiskDestructive, SchemaDigest: digest},
		{Name: "mcp.fs.stat", UpstreamName: "stat", Risk: v1alpha1.RiskRead, SchemaDigest: digest},
	}
	if err := cluster.admin.Status().Update(ctx, server); err != nil {
		t.Fatal(err)
	}
	if err := cluster.admin.Create(ctx, &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planner"},
		Spec: v1alpha1.ToolPolicySpec{
			Subjects: []v1alpha1.Subject{{Kind: v1alpha1.SubjectServiceAccount, Namespace: "agents", Name: "planner"}},
			Rules: []v1alpha1.ToolRule{
				{Tools: []string{"mcp.fs.read_file"}, Decision: v1alpha1.DecisionAllow, When: "args.path.startsWith('/data/')"},
				{Tools: []string{"mcp.fs.write_file"}, Decision: v1alpha1.DecisionAsk, Reason: "writes need a person"},
			},
			Approval: v1alpha1.ApprovalSpec{Channels: []v1alpha1.ApprovalChannel{v1alpha1.ChannelToolApproval}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	// A person signed in through an OAuth issuer, by the prefixed names the
	// bridge maps their claims to.
	if err := cluster.admin.Create(ctx, &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "people"},
		Spec: v1alpha1.ToolPolicySpec{
			Subjects: []v1alpha1.Subject{{Kind: v1alpha1.SubjectUser, Name: "oidc:alice@example.com"}, {Kind: v1alpha1.SubjectGroup, Name: "oidc:sre"}},
			Rules:    []v1alpha1.ToolRule{{Tools: []string{"mcp.fs.read_file"}, Decision: v1alpha1.DecisionAllow}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	// A policy for every authenticated user: TokenReview puts every agent
	// in system:authenticated, so can-i must too, without --as-group.
	if err := cluster.admin.Create(ctx, &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "everyone"},
		Spec: v1alpha1.ToolPolicySpec{
			Subjects: []v1alpha1.Subject{{Kind: v1alpha1.SubjectGroup, Name: "system:authenticated"}},
			Rules:    []v1alpha1.ToolRule{{Tools: []string{"mcp.fs.stat"}, Decision: v1alpha1.DecisionAllow}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"allowed for every authenticated user", []string{"can-i", "mcp.fs.stat", "--as", "system:serviceaccount:agents:other"}, 0,
			[]string{"yes\n", "policy:tools/everyone#rules[0]"}},
		{"allowed by a rule whose condition holds", []string{"can-i", "mcp.fs.read_file", "--as", agentUser, "--args", `{"path":"/data/a"}`}, 0,
			[]string{"yes\n", "policy:tools/planner#rules[0]", "risk read",
				"warning:  ToolPolicy tools/planner spec.rules[0].when: args.path.startsWith('/data/') tests a raw path", "path.clean(args.path).startsWith('/data/')"}},
		{"the same rule's condition fails", []string{"can-i", "mcp.fs.read_file", "--as", agentUser, "--args", `{"path":"/etc/passwd"}`}, 1,
			[]string{"no\n", "default", "warning:  ToolPolicy tools/planner spec.rules[0].when"}},
		{"asked through a ToolApproval", []string{"can-i", "mcp.fs.write_file", "--as", agentUser}, 1,
			[]string{"ask\n", "policy:tools/planner#rules[1]", "writes need a person", "through ToolApproval", "risk destructive"}},
		{"another subject", []string{"can-i", "mcp.fs.read_file", "--as", "system:serviceaccount:agents:other", "--args", `{"path":"/data/a"}`}, 1,
			[]string{"no\n", "denied by default"}},
		{"a tool the server does not publish, with its risk given", []string{"can-i", "mcp.fs.delete_tree", "--as", agentUser, "--risk", "destructive"}, 1,
			[]string{"no\n"}},
		{"a person by the prefixed name", []string{"can-i", "mcp.fs.read_file", "--as", "oidc:alice@example.com"}, 0,
			[]string{"yes\n", "subject:  oidc:alice@example.com", "policy:tools/people#rules[0]"}},
		{"a person by a prefixed group", []string{"can-i", "mcp.fs.read_file", "--as", "oidc:bob@example.com", "--as-group", "oidc:sre"}, 0,
			[]string{"yes\n", "policy:tools/people#rules[0]"}},
		{"the same name without the prefix is someone else", []string{"can-i", "mcp.fs.read_file", "--as", "alice@example.com"}, 1,
			[]string{"no\n"}},
		{"a person is also an authenticated user", []string{"can-i", "mcp.fs.stat", "--as", "oidc:carol@example.com"}, 0,
			[]string{"yes\n", "policy:tools/everyone#rules[0]"}},
		{"a tool the server does not publish", []string{"can-i", "mcp.fs.delete_tree", "--as", agentUser}, 1,
			[]string{"does not publish mcp.fs.delete_tree", "--risk"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := kubectlMCP(t, "alice", c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d:\n%s", code, c.code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestCanINotesServersItCouldNotList: can-i lints without the catalogs
// when the MCPServers cannot be listed, and says so unless it was only not
// allowed to. The API server will not fail a List on demand, so the
// failure is injected in front of the real client (failingList): the only
// stand-in of this test.
func TestCanINotesServersItCouldNotList(t *testing.T) {
	start(t)
	tp := v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "notes"},
		Spec: v1alpha1.ToolPolicySpec{
			Subjects: []v1alpha1.Subject{{Kind: v1alpha1.SubjectUser, Name: "alice"}},
			Rules:    []v1alpha1.ToolRule{{Tools: []string{"mcp.fs.read_file"}, Decision: v1alpha1.DecisionAllow, When: "args.path.startsWith('/data/')"}},
		},
	}
	rules := []policy.RuleRef{{Namespace: ns, Name: "notes", Section: "rules", Index: 0}}
	for _, c := range []struct {
		err  error
		note bool
	}{
		{apierrors.NewServiceUnavailable("etcd is away"), true},
		{apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "mcpservers"}, "", errors.New("no")), false},
		{nil, false},
	} {
		failing := failingList{Client: cluster.admin, err: c.err}
		var out bytes.Buffer
		printWarnings(context.Background(), &env{client: failing, namespace: ns, out: &out}, []v1alpha1.ToolPolicy{tp}, rules)
		if !strings.Contains(out.String(), "warning:  ToolPolicy "+ns+"/notes spec.rules[0].when: args.path.startsWith('/data/') tests a raw path") {
			t.Errorf("%v: the policy alone was not linted:\n%s", c.err, out.String())
		}
		if got := strings.Contains(out.String(), "note:     the MCPServers of "+ns+" could not be listed"); got != c.note {
			t.Errorf("%v: a note %v, want %v:\n%s", c.err, got, c.note, out.String())
		}
	}
}

// failingList is the real client, except that List fails with err when it
// is set.
type failingList struct {
	client.Client
	err error
}

func (f failingList) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if f.err != nil {
		return f.err
	}
	return f.Client.List(ctx, list, opts...)
}
