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
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// InstallAdmissionPolicies applies the admission policies shipped in
// config/admission, as `make deploy` and the chart do, and waits until the
// API server enforces them (it loads policies asynchronously, within a
// second or so): a ToolApproval created with a decision is then refused,
// and a ToolPolicy with a prefix test on a raw path gets a warning.
func InstallAdmissionPolicies(ctx context.Context, cfg *rest.Config) error {
	c, warnings, err := ClientWithWarnings(cfg)
	if err != nil {
		return err
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	paths, err := filepath.Glob(filepath.Join(root, "config", "admission", "*.yaml"))
	if err != nil {
		return err
	}
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		if err := createAll(ctx, c, p); err != nil {
			return err
		}
	}
	if err := awaitToolApprovalPolicy(ctx, c); err != nil {
		return err
	}
	return awaitToolPolicyLints(ctx, c, warnings)
}

// createAll creates every object of a YAML file.
func createAll(ctx context.Context, c client.Client, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("while reading %s: %w", path, err)
		}
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("while creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

func awaitToolApprovalPolicy(ctx context.Context, c client.Client) error {
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

// ToolPolicyLintsPolicy is the name of the admission policy that warns about
// ToolPolicy rules at apply time; its warnings name it.
const ToolPolicyLintsPolicy = "mcp-operator-toolpolicy-lints"

func awaitToolPolicyLints(ctx context.Context, c client.Client, warnings *Warnings) error {
	probe := &mcpv1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "admission-probe"},
		Spec: mcpv1alpha1.ToolPolicySpec{
			Subjects: []mcpv1alpha1.Subject{{Kind: mcpv1alpha1.SubjectUser, Name: "probe"}},
			Rules:    []mcpv1alpha1.ToolRule{{Tools: []string{"mcp.probe.*"}, Decision: mcpv1alpha1.DecisionAllow, When: "args.path.startsWith('/')"}},
		},
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll); err != nil {
			return fmt.Errorf("while creating a ToolPolicy (dry run): %w", err)
		}
		for _, w := range warnings.Take() {
			if strings.Contains(w, ToolPolicyLintsPolicy) {
				return nil
			}
		}
	}
	return errors.New("the ToolPolicy lints admission policy does not warn 30s after it was created")
}
