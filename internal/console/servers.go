package console

import (
	"net/http"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

type serversView struct {
	Now        time.Time
	Namespaces []string
	Servers    []serverRow
}

type serverRow struct {
	*v1alpha1.MCPServer
	Ready   *metav1.Condition
	Pinning string
}

// pinning says whether the server's catalog is pinned and, if so, whether
// the published catalog is the approved one.
func pinning(s *v1alpha1.MCPServer) string {
	t := s.Spec.Tools
	if t.CatalogPinning != v1alpha1.CatalogPinningLocked {
		return "Auto (every catalog change is published)"
	}
	if s.Status.CatalogDigest != "" && s.Status.CatalogDigest != t.ApprovedDigest {
		return "Locked: the server's catalog is NOT the approved one (" + t.ApprovedDigest + ")"
	}
	return "Locked to " + t.ApprovedDigest
}

func rowOf(s *v1alpha1.MCPServer) serverRow {
	return serverRow{MCPServer: s, Ready: meta.FindStatusCondition(s.Status.Conditions, "Ready"), Pinning: pinning(s)}
}

func (s *Server) serversPage(r *http.Request, x *session) (string, page, error) {
	ctx := r.Context()
	v := serversView{Now: s.opts.Now(), Namespaces: s.visible(ctx, x, "mcpservers")}
	var list v1alpha1.MCPServerList
	if err := s.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return "", page{}, err
	}
	for i := range list.Items {
		if _, ok := slices.BinarySearch(v.Namespaces, list.Items[i].Namespace); ok {
			v.Servers = append(v.Servers, rowOf(&list.Items[i]))
		}
	}
	slices.SortFunc(v.Servers, func(a, b serverRow) int {
		if a.Namespace != b.Namespace {
			return compareStrings(a.Namespace, b.Namespace)
		}
		return compareStrings(a.Name, b.Name)
	})
	return "servers", page{Title: "Servers", Nav: "servers", Live: topicServers, Data: v}, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type serverView struct {
	Now    time.Time
	Server serverRow
	// Events are the server's recent Events, read as the person;
	// EventsError says why there are none when the read failed.
	Events      []corev1.Event
	EventsError string
}

// maxEventsShown bounds a server's Events on its page (the newest).
const maxEventsShown = 20

func (s *Server) serverPage(r *http.Request, x *session) (string, page, error) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	notFound := &pageError{http.StatusNotFound, "No MCPServer " + ns + "/" + name + " that you may see."}
	if !s.mayList(ctx, x, ns, "mcpservers") {
		return "", page{}, notFound
	}
	var srv v1alpha1.MCPServer
	if err := s.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &srv); err != nil {
		return "", page{}, notFound
	}
	v := serverView{Now: s.opts.Now(), Server: rowOf(&srv)}
	v.Events, v.EventsError = s.serverEvents(r, x, &srv)
	return "server", page{Title: "Server " + ns + "/" + name, Nav: "servers", Live: topicServers, Data: v}, nil
}

// serverEvents reads the server's Events as the person: Events are not
// watched by the console, and RBAC on them is the person's.
func (s *Server) serverEvents(r *http.Request, x *session, srv *v1alpha1.MCPServer) ([]corev1.Event, string) {
	pc, err := s.clientsOf(x)
	if err != nil {
		return nil, err.Error()
	}
	list, err := pc.core.Events(srv.Namespace).List(r.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "MCPServer", "involvedObject.name": srv.Name}.String(),
	})
	if err != nil {
		return nil, "Events of " + srv.Namespace + "/" + srv.Name + " could not be read as " + x.person.Username + ": " + apiMessage(err)
	}
	events := list.Items
	sort.Slice(events, func(i, j int) bool { return lastSeen(&events[i]).After(lastSeen(&events[j])) })
	if len(events) > maxEventsShown {
		events = events[:maxEventsShown]
	}
	return events, ""
}

func lastSeen(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
