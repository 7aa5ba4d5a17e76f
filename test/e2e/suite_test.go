//go:build e2e

// Package e2e checks the operator on a real single-node cluster (`make dev`):
// real pods with real cgroup limits, crashes and OOM kills made real. Run by
// `make e2e` (part of `make test`), which brings the cluster up and down.
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

var (
	k8sClient client.Client
	clientset *kubernetes.Clientset
	// kubectl runs commands in pods (exec); it is built for the dev cluster.
	kubectl []string
	// kubeconfigPath is the cluster's kubeconfig (KUBECONFIG, or the dev
	// cluster's).
	kubeconfigPath string
	ctx            = context.Background()
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "mcp-operator end to end on a real single-node cluster")
}

var _ = BeforeSuite(func() {
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(root, ".dev", "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred(), "no dev cluster: run 'make e2e', which starts one")
	kubectl = []string{filepath.Join(root, "bin", "k8s", "kubectl"), "--kubeconfig", kubeconfig}
	kubeconfigPath = kubeconfig
	k8sClient, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
})
