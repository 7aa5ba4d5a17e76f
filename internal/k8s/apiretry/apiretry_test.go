package apiretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
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
		"connection refused":                   {fmt.Errorf("while creating the ToolApproval: %w", refused), Wait, true},
		"no answer in time":                    {context.DeadlineExceeded, Wait, true},
		"unavailable":                          {apierrors.NewServiceUnavailable("starting"), Wait, true},
		"too many requests, 3 s":               {apierrors.NewTooManyRequests("slow down", 3), 3 * time.Second, true},
		"timeout, 2 s":                         {apierrors.NewServerTimeout(gr, "create", 2), 2 * time.Second, true},
		"internal error":                       {apierrors.NewInternalError(errors.New("etcd")), Wait, true},
		"forbidden":                            {apierrors.NewForbidden(gr, "x", errors.New("no")), 0, false},
		"invalid":                              {apierrors.NewInvalid(schema.GroupKind{Kind: "ToolApproval"}, "x", nil), 0, false},
		"namespace not found, wrapped":         {fmt.Errorf("while creating: %w", apierrors.NewNotFound(gr, "x")), 0, false},
		"no error":                             {nil, 0, false},
		"connection reset":                     {fmt.Errorf("while reading: %w", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), Wait, true},
		"answer cut short":                     {fmt.Errorf("while reading: %w", io.ErrUnexpectedEOF), Wait, true},
		"no answer at all":                     {io.EOF, Wait, true},
		"dial timeout":                         {&net.DNSError{Err: "i/o timeout", IsTimeout: true}, Wait, true},
		"client-side timeout":                  {apierrors.NewTimeoutError("watching", 1), time.Second, true},
		"unexpected server error":              {apierrors.NewGenericServerResponse(502, "get", gr, "x", "bad gateway", 0, true), Wait, true},
		"the kind is not served (CRD missing)": {&meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "mcp-operator.dev", Kind: "ToolApproval"}}, 0, false},
		"type not registered":                  {runtime.NewNotRegisteredErrForKind("scheme", schema.GroupVersionKind{Kind: "Nope"}), 0, false},
		"cancelled":                            {fmt.Errorf("while creating: %w", context.Canceled), 0, false},
		"a local error":                        {errors.New("the token file could not be read"), 0, false},
		"conflict":                             {apierrors.NewConflict(gr, "x", errors.New("changed")), 0, false},
	} {
		after, ok := After(tc.err)
		if after != tc.after || ok != tc.ok {
			t.Errorf("%s: After = %s, %v; want %s, %v", name, after, ok, tc.after, tc.ok)
		}
	}
}
