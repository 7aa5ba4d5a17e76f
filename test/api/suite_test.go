// Package api_test checks the v1alpha1 API as users meet it: the generated
// CRDs served by a real kube-apiserver, with their defaults, bounds, CEL rules,
// status subresource, printer columns and short names.
package api_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

var (
	env       *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	disco     *discovery.DiscoveryClient
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "v1alpha1 API on a real API server")
}

var _ = BeforeSuite(func() {
	var err error
	env, err = testenv.New()
	Expect(err).NotTo(HaveOccurred())
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	disco, err = discovery.NewDiscoveryClientForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	installAdmissionPolicy()
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// ctx is the context of every API call in this suite.
var ctx = context.Background()
