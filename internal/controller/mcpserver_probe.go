package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/k8s/credentials"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// Prober reads a server's catalog. The real one speaks MCP (internal/mcp);
// the interface keeps the reconciler independent of the wire.
type Prober interface {
	Probe(ctx context.Context, target ProbeTarget) (*Catalog, error)
}

// ProbeTarget is where and how to reach a server.
type ProbeTarget struct {
	// Server is the MCPServer probed: its name prefixes the tools and its
	// spec.tools decides exclusions and risks.
	Server *mcpv1alpha1.MCPServer
	URL    string
	Header http.Header
	// TLS is nil for the default TLS settings.
	TLS     *tls.Config
	Timeout time.Duration
	// Redactor redacts the server's own Secret values (and the credential
	// shapes) from what the probe publishes: descriptions, titles, errors.
	// Nil: the shapes alone.
	Redactor *redact.Redactor
}

// Catalog is what a probe publishes in status.
type Catalog struct {
	ServerInfo   mcpv1alpha1.ServerInfo
	Capabilities mcpv1alpha1.ServerCapabilities
	// Tools are the valid tools, sorted by namespaced name.
	Tools []mcpv1alpha1.ToolStatus
	// Invalid names the tools left out and why ("name: reason"), sorted.
	Invalid       []string
	Prompts       []mcpv1alpha1.PromptStatus
	Skills        []mcpv1alpha1.SkillStatus
	ResourceCount int32
	// Digest is "sha256:<hex>" of the canonical catalog.
	Digest string
}

// secretRedactor redacts the values of the Secrets s is given, read at each
// probe like its credentials; nil when it is given none. A Secret that can't
// be read leaves its value out (the pod or the probe fails without it).
func (r *MCPServerReconciler) secretRedactor(ctx context.Context, s *mcpv1alpha1.MCPServer) *redact.Redactor {
	if r.APIReader == nil {
		return nil
	}
	values, err := credentials.Values(ctx, r.APIReader, s)
	if err != nil {
		log.FromContext(ctx).V(1).Info("a Secret the server is given could not be read to redact its value", "error", err.Error())
	}
	if len(values) == 0 {
		return nil
	}
	return redact.New(values...)
}

// remoteTarget reads the Secrets a remote server's spec names.
func remoteTarget(ctx context.Context, c client.Reader, s *mcpv1alpha1.MCPServer) (ProbeTarget, error) {
	creds, err := credentials.Read(ctx, c, s)
	header := creds.Header
	if header == nil {
		header = http.Header{}
	}
	if creds.BearerToken != "" {
		header.Set("Authorization", "Bearer "+creds.BearerToken)
	}
	return ProbeTarget{Server: s, URL: s.Spec.Remote.URL, Header: header, TLS: creds.TLS, Timeout: s.Spec.Probe.Timeout.Duration}, err
}

// workloadURL is the pod's MCP endpoint: the bridge and the probe dial the pod
// IP, so a restart shows as a new endpoint and cluster DNS is not needed.
func workloadURL(s *mcpv1alpha1.MCPServer, pod *corev1.Pod) string {
	port := s.Spec.Workload.Port
	if port == 0 {
		port = 8080
	}
	path := s.Spec.Workload.Path
	if path == "" {
		path = "/mcp"
	}
	host := pod.Status.PodIP
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("http://%s:%d%s", host, port, path)
}

// probeWorkload probes the running pod. A failed probe is retried soon;
// probeFailuresToCrash in a row are a crash.
func (r *MCPServerReconciler) probeWorkload(ctx context.Context, sc *scope) (phaseResult, error) {
	s := sc.server
	var redactor *redact.Redactor
	if sc.early != nil {
		redactor = sc.early.redactor
	} else {
		redactor = r.secretRedactor(ctx, s)
	}
	target := ProbeTarget{Server: s, URL: workloadURL(s, sc.pod), Timeout: s.Spec.Probe.Timeout.Duration, Redactor: redactor}
	cat, err := r.Prober.Probe(ctx, target)
	if err != nil && (servesFrom(s, sc.pod) || !sc.beforeReady) {
		// The probe's answer is newer than the cached pod: a server that
		// stopped answering because its pod is being deleted (the kubelet's
		// SIGTERM) or was replaced says nothing about the server.
		if pr, gone, readErr := r.probedPodGone(ctx, sc); gone || readErr != nil {
			return pr, readErr
		}
	}
	if err != nil && sc.beforeReady {
		return phaseResult{}, r.startingAfterEarlyProbe(sc, redactor)
	}
	if err != nil {
		return r.probeFailed(sc, err)
	}
	s.Status.Restarts.ProbeFailures = 0
	sc.catalog, sc.endpoint = cat, &mcpv1alpha1.Endpoint{URL: target.URL, PodName: sc.pod.Name, PodUID: string(sc.pod.UID)}
	return phaseResult{}, nil
}

// probedPodGone reads the probed pod again, uncached, after a failed probe
// that would count or would withdraw the pod's endpoint. When the pod is
// being deleted, or is gone (replaced or not, by a pod of the same name),
// the failure is the removal's, not the server's: the pod phase's handling
// runs on what the read found instead, and no probe failure is counted.
// Reads only on such a failure: the early retries of a pod not served yet
// send none.
func (r *MCPServerReconciler) probedPodGone(ctx context.Context, sc *scope) (phaseResult, bool, error) {
	if r.APIReader == nil {
		return phaseResult{}, false, nil
	}
	var cur corev1.Pod
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(sc.pod), &cur)
	switch {
	case apierrors.IsNotFound(err) || err == nil && cur.UID != sc.pod.UID:
		// Gone before the cache showed its deletion: as when the pod
		// phase finds none, the next reconcile starts a new one.
		return phaseResult{}, true, r.podGone(sc, sc.pod.Name)
	case err != nil:
		return phaseResult{}, false, fmt.Errorf("while reading the server's pod %s after a failed probe: %w", sc.pod.Name, err)
	}
	switch state := readPod(&cur, r.deletions.first(cur.UID)); state.phase {
	case podRemoved:
		pr, err := r.podRemoved(ctx, sc, &cur, state.message)
		return pr, true, err
	case podTerminated:
		// Its server ended on its own (before any deletion): a crash, as
		// the next reconcile's pod phase would find.
		pr, err := r.crash(sc, state.reason, state.message)
		return pr, true, err
	}
	return phaseResult{}, false, nil
}

// startingAfterEarlyProbe: a pod probed before the kubelet found it Ready
// failed its probe, which is no failure: the server may not listen yet. It
// is probed again soon for a few seconds after its start; later, the
// kubelet's Ready (a pod update) brings it back. The window ends by time
// and by count: the start time is the node's clock, and a controller whose
// clock runs behind the node's would otherwise retry for longer.
func (r *MCPServerReconciler) startingAfterEarlyProbe(sc *scope, redactor *redact.Redactor) *waitingError {
	w := &waitingError{reason: mcpv1alpha1.ReasonStarting, message: "the server's pod is starting"}
	retries := 0
	if sc.early != nil {
		retries = sc.early.retries
	}
	if sc.now.Sub(sc.upSince) < earlyProbeWindow && retries < earlyProbeRetries {
		w.after = earlyProbeRetry
		r.earlyRetries.Store(client.ObjectKeyFromObject(sc.server), &earlyRetry{
			uid: sc.server.UID, generation: sc.server.Generation, pod: sc.pod.UID, retries: retries + 1, redactor: redactor,
		})
	}
	return w
}

// earlyRetry is what an early probe's retry hands to the next reconcile of
// the server: that the owned objects were applied for this spec, the
// Secrets' values read for the redactor, and how many retries there were.
// Each retry would otherwise run the whole reconcile's API requests again.
type earlyRetry struct {
	uid        types.UID
	generation int64
	// pod is the UID of the pod retried: a pod deleted and replaced by one
	// of the same name (a name is the server's incarnation and spec, not a
	// pod) starts its retries over.
	pod      types.UID
	retries  int
	redactor *redact.Redactor
}

// takeEarlyRetry takes what the last early retry of the server handed on,
// if it is of the same server and spec; any reconcile takes it, so it never
// outlives the retries.
func (r *MCPServerReconciler) takeEarlyRetry(s *mcpv1alpha1.MCPServer) *earlyRetry {
	v, ok := r.earlyRetries.LoadAndDelete(client.ObjectKeyFromObject(s))
	if !ok {
		return nil
	}
	e := v.(*earlyRetry)
	if e.uid != s.UID || e.generation != s.Generation {
		return nil
	}
	return e
}

func (r *MCPServerReconciler) probeFailed(sc *scope, probeErr error) (phaseResult, error) {
	s := sc.server
	s.Status.Restarts.ProbeFailures++
	if n := s.Status.Restarts.ProbeFailures; n >= probeFailuresToCrash {
		return r.crash(sc, fmt.Sprintf("ProbeFailed (%d probes in a row: %v)", n, probeErr), "")
	}
	msg := "probe failed: " + probeErr.Error()
	if meta.IsStatusConditionTrue(s.Status.Conditions, mcpv1alpha1.ConditionReady) {
		// One slow answer is not a crash: the published catalog stays.
		setCondition(s, mcpv1alpha1.ConditionAvailable, metav1.ConditionFalse, mcpv1alpha1.ReasonProbeFailed, msg)
		return phaseResult{requeueAfter: probeRetry, stop: true}, nil
	}
	return phaseResult{}, &waitingError{reason: mcpv1alpha1.ReasonProbeFailed, message: msg, after: probeRetry}
}

// probeRemote reads the Secrets a remote server's spec names and probes it.
func (r *MCPServerReconciler) probeRemote(ctx context.Context, sc *scope) (phaseResult, error) {
	s := sc.server
	target, err := remoteTarget(ctx, r.APIReader, s)
	if err != nil {
		return phaseResult{}, &stalledError{reason: mcpv1alpha1.ReasonCredentialsMissing, message: err.Error(), recheck: credentialsRecheck}
	}
	target.Redactor = r.secretRedactor(ctx, s)
	cat, err := r.Prober.Probe(ctx, target)
	if err != nil {
		return phaseResult{}, &waitingError{reason: mcpv1alpha1.ReasonProbeFailed, message: "probe failed: " + err.Error(), after: remoteProbeRetry}
	}
	sc.catalog, sc.endpoint = cat, &mcpv1alpha1.Endpoint{URL: s.Spec.Remote.URL}
	return phaseResult{}, nil
}
