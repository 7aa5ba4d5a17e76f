package lifecycle

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func TestEvents(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	with := func(s v1alpha1.MCPServer, f func(*v1alpha1.MCPServer)) *v1alpha1.MCPServer {
		c := s.DeepCopy()
		f(c)
		return c
	}
	// A Ready server (Events reads its conditions, restarts and spec).
	var base v1alpha1.MCPServer
	base.Namespace, base.Name = "tools", "fs"
	base.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
	crashed := with(base, func(s *v1alpha1.MCPServer) {
		s.Status.Restarts = v1alpha1.RestartStatus{Total: 1, Consecutive: 1, LastExitReason: "OOMKilled",
			LastCrashTime: &metav1.MicroTime{Time: at}, NextRestartTime: &metav1.MicroTime{Time: at.Add(500 * time.Millisecond)}}
		s.Status.Conditions[0] = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRestarting}
	})
	gaveUp := with(*crashed, func(s *v1alpha1.MCPServer) {
		s.Status.Restarts.Total, s.Status.Restarts.Consecutive = 4, 4
		s.Status.Conditions[0].Reason = v1alpha1.ReasonPermanentlyFailed
	})
	suspended := with(base, func(s *v1alpha1.MCPServer) { s.Spec.Suspend = true })
	for _, tc := range []struct {
		name       string
		prev, next *v1alpha1.MCPServer
		want       string
	}{
		{"first reading", nil, &base, `[]`},
		{"unchanged", &base, &base, `[]`},
		{"crash and restart", &base, crashed, `[{"server":"fs","namespace":"tools","reason":"OOMKilled","crashes":1},{"server":"fs","namespace":"tools","attempt":1,"backoffMs":500}]`},
		{"gave up", crashed, gaveUp, `[{"server":"fs","namespace":"tools","reason":"OOMKilled","crashes":4},{"server":"fs","namespace":"tools","restarts":4,"lastExitReason":"OOMKilled"}]`},
		{"suspended", &base, suspended, `[{"server":"fs","namespace":"tools","reason":"suspend"}]`},
		{"deleted", &base, nil, `[{"server":"fs","namespace":"tools","reason":"delete"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev, next := map[string]*v1alpha1.MCPServer{}, map[string]*v1alpha1.MCPServer{}
			if tc.prev != nil {
				prev["tools/fs"] = tc.prev
			}
			if tc.next != nil {
				next["tools/fs"] = tc.next
			}
			events := Events(prev, next)
			got, _ := json.Marshal(events)
			if events == nil {
				got = []byte(`[]`)
			}
			if string(got) != tc.want {
				t.Fatalf("events %s, want %s", got, tc.want)
			}
		})
	}
}
