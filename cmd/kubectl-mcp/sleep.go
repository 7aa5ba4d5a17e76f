package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Sleep and wake by hand, for maintenance. Both write what the controller
// already reads: sleep the MCPServer's sleep annotation, wake the activity
// Lease's renewTime (as a bridge does on a call), so a wake by hand and a
// wake by a call are the same thing.

// holder is the holderIdentity of the Lease writes of `kubectl mcp wake`.
const holder = "kubectl-mcp"

func sleepCmd(*flag.FlagSet) func(*env, []string) error {
	return func(e *env, args []string) error {
		s, err := oneServer(e, args)
		if err != nil {
			return err
		}
		if s.Spec.Workload == nil {
			return fmt.Errorf("mcpserver %s is a remote server: only workload servers sleep", s.Name)
		}
		// After the last activity the Lease records, even if this machine's
		// clock is behind the bridge's: the request must count.
		at := time.Now()
		if l, err := activityLease(e, s); err == nil && l.Spec.RenewTime != nil && !at.After(l.Spec.RenewTime.Time) {
			at = l.Spec.RenewTime.Add(time.Millisecond)
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			v1alpha1.SleepAnnotation: at.UTC().Format(time.RFC3339Nano),
		}}})
		if err := e.client.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("while asking mcpserver %s to sleep: %w", s.Name, err)
		}
		fmt.Fprintf(e.out, "mcpserver %s is put to sleep: its pod is removed, its tools stay listed, and the next call (or 'kubectl mcp wake %s') wakes it.\n", s.Name, s.Name)
		return nil
	}
}

func wakeCmd(*flag.FlagSet) func(*env, []string) error {
	return func(e *env, args []string) error {
		s, err := oneServer(e, args)
		if err != nil {
			return err
		}
		l, err := activityLease(e, s)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("mcpserver %s has no activity Lease: it neither sleeps when idle (spec.workload.idle) nor was put to sleep", s.Name)
		}
		if err != nil {
			return fmt.Errorf("while reading the activity Lease of mcpserver %s: %w", s.Name, err)
		}
		// Newer than the time it fell asleep (the controller's clock) and
		// than a sleep request: either may be ahead of this machine's clock.
		at := time.Now()
		if since := s.Status.SleepingSince; since != nil && !at.After(since.Time) {
			at = since.Add(time.Millisecond)
		}
		if asked, err := time.Parse(time.RFC3339, s.Annotations[v1alpha1.SleepAnnotation]); err == nil && !at.After(asked) {
			at = asked.Add(time.Millisecond)
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{
			"renewTime": at.UTC().Format("2006-01-02T15:04:05.000000Z07:00"), "holderIdentity": holder,
		}})
		if err := e.client.Patch(context.Background(), l, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("while waking mcpserver %s: %w", s.Name, err)
		}
		if s.Status.SleepingSince == nil {
			fmt.Fprintf(e.out, "mcpserver %s is awake; its idle time starts over.\n", s.Name)
			return nil
		}
		fmt.Fprintf(e.out, "mcpserver %s is waking: Ready says Waking until its pod answers ('kubectl get mcps %s -w').\n", s.Name, s.Name)
		return nil
	}
}

// oneServer reads the MCPServer named by the only argument.
func oneServer(e *env, args []string) (*v1alpha1.MCPServer, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("give the name of one MCPServer")
	}
	var s v1alpha1.MCPServer
	if err := e.client.Get(context.Background(), types.NamespacedName{Namespace: e.namespace, Name: args[0]}, &s); err != nil {
		return nil, fmt.Errorf("while reading mcpserver %s: %w", args[0], err)
	}
	return &s, nil
}

func activityLease(e *env, s *v1alpha1.MCPServer) (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	err := e.client.Get(context.Background(), types.NamespacedName{Namespace: s.Namespace, Name: s.Name + v1alpha1.ActivityLeaseSuffix}, &l)
	return &l, err
}
