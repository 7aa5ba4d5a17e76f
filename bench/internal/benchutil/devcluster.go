package benchutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// The dev install (make dev): its bridge serves namespace default.
const (
	DevNamespace       = "default"
	DevBridgeNamespace = "mcp-operator-system"
	DevBridgeService   = "mcp-operator-bridge"
)

// Dev is the dev cluster as a benchmark uses it, as its admin.
type Dev struct {
	Config *rest.Config
	C      client.WithWatch
	CS     *kubernetes.Clientset
	// BridgeURL is the bridge Service's /mcp, by its cluster IP: the dev
	// cluster has no cluster DNS, and kube-proxy routes a Service's IP from
	// the node.
	BridgeURL string
	// Root is the repository's root, where .dev and hack live.
	Root string
}

// ConnectDev reads the dev cluster's kubeconfig (KUBECONFIG, else .dev's)
// and finds the bridge's Service.
func ConnectDev(ctx context.Context) (*Dev, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(root, ".dev", "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("no dev cluster (the make target starts one): %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	d := &Dev{Config: cfg, Root: root}
	if d.C, err = client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return nil, err
	}
	if d.CS, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	var svc corev1.Service
	if err := d.C.Get(ctx, client.ObjectKey{Namespace: DevBridgeNamespace, Name: DevBridgeService}, &svc); err != nil {
		return nil, fmt.Errorf("the bridge's Service: %w", err)
	}
	d.BridgeURL = fmt.Sprintf("http://%s:%d/mcp", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	return d, nil
}

// AgentToken creates ServiceAccount name in the served namespace (if
// absent) and returns a token of it for the bridge's audience.
func (d *Dev) AgentToken(ctx context.Context, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: DevNamespace, Name: name}}
	if err := d.C.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
		return "", err
	}
	tr, err := d.CS.CoreV1().ServiceAccounts(DevNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"mcp-operator"}, ExpirationSeconds: ptr.To(int64(4 * 3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token for agent %s: %w", name, err)
	}
	return tr.Status.Token, nil
}

// ManagerPIDs are the processes on this node running the manager binary
// with subcommand sub ("controller", "bridge"): the dev cluster's pods are
// this machine's processes.
func ManagerPIDs(sub string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) >= 2 && filepath.Base(args[0]) == "manager" && args[1] == sub {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, errors.New("no manager " + sub + " process on this node: is the dev cluster up, and is this run as root?")
	}
	return pids, nil
}
