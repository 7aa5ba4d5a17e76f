//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

var _ = Describe("make dev, as a new user meets it", func() {
	It("has every sample Ready, and every command it printed works as printed", func() {
		var list mcpv1alpha1.MCPServerList
		Expect(k8sClient.List(ctx, &list, client.InNamespace("default"))).To(Succeed())
		var names []string
		for i := range list.Items {
			names = append(names, list.Items[i].Name)
		}
		Expect(names).To(ConsistOf("everything", "everything-stdio", "filesystem"))
		for i := range list.Items {
			s := &list.Items[i]
			Eventually(ready(s)).WithTimeout(90*time.Second).Should(Equal("True/Serving"), s.Name)
		}

		// dev.sh printed the commands of this file, as they are in it.
		root, err := testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		cmd := exec.Command("bash", "-euo", "pipefail", filepath.Join(root, ".dev", "try-it.sh"))
		// A new user's shell: no KUBECONFIG of the test's own.
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "KUBECONFIG=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		for _, name := range names {
			Expect(string(out)).To(MatchRegexp(`(?m)^%s\s+\S+\s+True\s+Serving\s`, name), "kubectl get mcpservers")
		}
		// tools/list through the bridge, as the sample policy's agent: the
		// tools it allows, none it denies.
		Expect(string(out)).To(MatchRegexp(`"name":\s*"mcp\.everything\.test_simple_text"`))
		Expect(string(out)).To(MatchRegexp(`"name":\s*"mcp\.filesystem\.read_text_file"`))
		Expect(string(out)).NotTo(ContainSubstring("mcp.everything.get-env"))
		// With Jaeger running (make e2e starts it), dev.sh printed a query
		// of its API, which answers with the services it holds spans of ({}
		// before the first batch arrives); without Jaeger, no such line.
		script, err := os.ReadFile(filepath.Join(root, ".dev", "try-it.sh"))
		Expect(err).NotTo(HaveOccurred())
		jaegerLine := MatchRegexp(`(?m)^curl -sS http://\S+:16686/api/v3/services$`)
		if tracingRuns() {
			Expect(string(script)).To(jaegerLine)
			Expect(string(out)).To(MatchRegexp(`\{("services":\[[^\]]*\])?\}\s*$`))
		} else {
			Expect(string(script)).NotTo(jaegerLine, "dev.sh printed a query of a Jaeger it did not start")
		}
		// No JSON-RPC error in the answer. The controller's log lines printed
		// above it are left out: they may hold errors about other specs'
		// servers (a namespace being deleted refuses their NetworkPolicy).
		var printed []string
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, `{"level":`) {
				printed = append(printed, line)
			}
		}
		Expect(strings.Join(printed, "\n")).NotTo(ContainSubstring(`"error"`))
	})
})

var _ = Describe("MCPServer status on a real node", func() {
	It("says which image cannot be pulled, and the runtime's reason", func() {
		ns := namespace()
		s := httpEverything(ns, "nopull")
		s.Spec.Workload.Image = "localhost/mcp-operator/does-not-exist:dev"
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("False/ImagePullFailed"))
		c := meta.FindStatusCondition(get(s).Status.Conditions, mcpv1alpha1.ConditionReady)
		Expect(c.Message).To(MatchRegexp(`^image "localhost/mcp-operator/does-not-exist:dev" of container server cannot be pulled: .{10,}`))
		Eventually(func() []string { return events(s) }).Should(ContainElement(HavePrefix("ImagePullFailed: image ")))
	})
})
