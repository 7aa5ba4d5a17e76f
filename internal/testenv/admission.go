package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// InstallAdmissionPolicies applies the admission policies shipped in
// config/admission, as `make deploy` and the chart do, and waits until the
// API server enforces them (it loads policies asynchronously, within a
// second or so): a ToolApproval created with a decision is then refused.
func InstallAdmissionPolicies(ctx context.Context, c client.Client) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "admission", "toolapproval_policy.yaml"))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("while reading config/admission: %w", err)
		}
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("while creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	probe := &mcpv1alpha1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "admission-probe"},
		Spec: mcpv1alpha1.ToolApprovalSpec{
			Request: mcpv1alpha1.ApprovalRequest{
				Requester: mcpv1alpha1.ApprovalRequester{Username: "probe"}, Method: "tools/call", Server: "probe", Target: "mcp.probe.x",
				Risk: mcpv1alpha1.RiskRead, Modes: []mcpv1alpha1.ApprovalMode{mcpv1alpha1.ApprovalAllowOnce}, ExpiresAt: metav1.Now(),
			},
			Decision: &mcpv1alpha1.ApprovalDecision{Verdict: mcpv1alpha1.VerdictDeny, Decider: "probe"},
		},
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "created without spec.decision") {
			return nil
		}
	}
	return errors.New("the ToolApproval admission policy is not enforced 30s after it was created")
}
