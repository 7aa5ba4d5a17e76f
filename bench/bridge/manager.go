package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// managerIdleRSS runs the real `manager bridge` (built from cmd/manager) on
// a real kube-apiserver and etcd (envtest), serving the fast upstream as an
// MCPServer with one ToolPolicy, with real TokenReview authentication of a
// real ServiceAccount token. After 200 calls through it, and a moment idle,
// its RSS is what the process holds with its informers and caches.
func managerIdleRSS(root string, fast *mcpServer) (int64, error) {
	dir, err := os.MkdirTemp("", "bench-manager-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir, build.Stderr = root, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("building cmd/manager: %w", err)
	}
	env, err := testenv.New()
	if err != nil {
		return 0, err
	}
	cfg, err := env.Start()
	if err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	for _, ns := range []string{"tools", "agents"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return 0, err
		}
	}
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "bench"}}); err != nil {
		return 0, err
	}
	s, err := serverFromProbe(ctx, fast.name, fast.url)
	if err != nil {
		return 0, err
	}
	status := s.Status
	s.Spec.Transport = v1alpha1.TransportStreamableHTTP
	s.Spec.Remote = &v1alpha1.Remote{URL: fast.url} // no pod to run
	if err := c.Create(ctx, &s); err != nil {
		return 0, err
	}
	s.Status = status
	if err := c.Status().Update(ctx, &s); err != nil {
		return 0, err
	}
	for _, p := range benchPolicy() {
		if err := c.Create(ctx, &p); err != nil {
			return 0, err
		}
	}
	token, err := saToken(cfg)
	if err != nil {
		return 0, err
	}
	kubeconfig, err := kubeconfigFile(env, dir)
	if err != nil {
		return 0, err
	}
	addr, ops := benchutil.FreeAddr(), benchutil.FreeAddr()
	cmd, err := start(addr, []string{"KUBECONFIG=" + kubeconfig}, bin, "bridge", "--namespaces=tools", "--listen="+addr,
		"--metrics-bind-address="+ops, "--audit-log="+filepath.Join(dir, "audit.jsonl"), "--artifact-dir="+filepath.Join(dir, "artifacts"))
	if err != nil {
		return 0, err
	}
	defer benchutil.Stop(cmd)
	url := "http://" + addr + "/mcp"
	// The informers fill the table shortly after the process listens.
	var callErr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, callErr = sequential(url, token, mcpclient.EraSession, "mcp.fast.echo", fast.args, 200); callErr == nil {
			break
		}
	}
	if callErr != nil {
		return 0, callErr
	}
	time.Sleep(2 * time.Second) // idle: what the process keeps, not what a call had in hand
	return benchutil.RSS(cmd.Process.Pid), nil
}

// saToken is a real token of agents/bench for the bridge's audience.
func saToken(cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts("agents").CreateToken(context.Background(), "bench", &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{Audiences: []string{authn.Audience}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest for agents/bench: %w", err)
	}
	return tr.Status.Token, nil
}

// kubeconfigFile is a kubeconfig of a user of the test API server that may
// do anything, as the bridge's ServiceAccount may do what its role allows.
func kubeconfigFile(env *envtest.Environment, dir string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "bench-bridge", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}
