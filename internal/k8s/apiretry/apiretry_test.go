package apiretry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAfter(t *testing.T) {
	gr := schema.GroupResource{Group: "mcp-operator.dev", Resource: "toolapprovals"}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for name, tc := range map[string]struct {
		err   error
		after time.Duration
		ok    bool
	}{
		"connection refused":           {fmt.Errorf("while creating the ToolApproval: %w", refused), Wait, true},
		"no answer in time":            {context.DeadlineExceeded, Wait, true},
		"unavailable":                  {apierrors.NewServiceUnavailable("starting"), Wait, true},
		"too many requests, 3 s":       {apierrors.NewTooManyRequests("slow down", 3), 3 * time.Second, true},
		"timeout, 2 s":                 {apierrors.NewServerTimeout(gr, "create", 2), 2 * time.Second, true},
		"internal error":               {apierrors.NewInternalError(errors.New("etcd")), Wait, true},
		"forbidden":                    {apierrors.NewForbidden(gr, "x", errors.New("no")), 0, false},
		"invalid":                      {apierrors.NewInvalid(schema.GroupKind{Kind: "ToolApproval"}, "x", nil), 0, false},
		"namespace not found, wrapped": {fmt.Errorf("while creating: %w", apierrors.NewNotFound(gr, "x")), 0, false},
		"no error":                     {nil, 0, false},
	} {
		after, ok := After(tc.err)
		if after != tc.after || ok != tc.ok {
			t.Errorf("%s: After = %s, %v; want %s, %v", name, after, ok, tc.after, tc.ok)
		}
	}
}
