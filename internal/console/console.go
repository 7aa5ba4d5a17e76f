// Package console is the web console for people: they sign in with the
// OIDC issuer the bridge trusts, and decide ToolApprovals, look at servers,
// catalogs, policies and what agents did. It acts on the API server as the
// signed-in person (impersonation), so RBAC and the ToolApproval admission
// policy judge that person, never the console.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/k8s/restmap"
)

// Defaults of Options.
const (
	DefaultSessionMaxAge = 8 * time.Hour
	DefaultSessionIdle   = time.Hour
)

// Options configure a console.
type Options struct {
	// Rest is the console's own connection to the API server: its watches
	// use it as is; every read for a person and every decision use it with
	// that person impersonated.
	Rest *rest.Config
	// Scheme knows the kinds the console watches and decides (nil:
	// Scheme()).
	Scheme *runtime.Scheme
	// PublicURL is where people reach the console (scheme and host, no
	// path): the identity provider redirects to PublicURL/callback, and a
	// change is accepted only from a page of this origin. Cookies are
	// Secure when it is https.
	PublicURL string
	// SignIn says how people sign in.
	SignIn SignInOptions
	// Mapper turns the verified claims of a person's ID token into who
	// they are: the same mapping (AuthenticationConfiguration) as the
	// bridge's for this issuer, so a person has one name in policies,
	// approvals and audit events.
	Mapper *identity.Mapper
	// SessionMaxAge and SessionIdle end sessions (defaults above).
	SessionMaxAge, SessionIdle time.Duration
	// TraceURL, when set, links an activity row's trace id: {traceId} in
	// it is replaced by the id (e.g. http://jaeger:16686/trace/{traceId}).
	TraceURL string
	// Activity is where the activity page's calls come from (nil: the page
	// says no audit source is configured).
	Activity *Activity
	Log      logr.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

// Server is a console: its HTTP handler, its sessions and the caches its
// pages read.
type Server struct {
	opts     Options
	origin   string
	secure   bool
	sessions *sessions
	signIn   *signIn
	cache    cache.Cache
	mapper   meta.RESTMapper
	hub      *hub
	streams  *streamSlots
	pages    *pages
	handler  http.Handler
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New builds a console. It reads the identity provider's discovery
// document, so the provider must be reachable; Start then starts the
// watches.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionMaxAge <= 0 {
		o.SessionMaxAge = DefaultSessionMaxAge
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	if o.Scheme == nil {
		o.Scheme = Scheme()
	}
	if o.Mapper == nil {
		return nil, errors.New("console: no claim mapping")
	}
	u, err := url.Parse(o.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.TrimSuffix(u.Path, "/") != "" {
		return nil, fmt.Errorf("console: the public URL must be http(s)://host[:port], not %q", o.PublicURL)
	}
	s := &Server{opts: o, origin: u.Scheme + "://" + u.Host, secure: u.Scheme == "https", hub: newHub(), streams: newStreamSlots()}
	s.sessions = newSessions(o.SessionMaxAge, o.SessionIdle, o.Now)
	if s.signIn, err = newSignIn(ctx, o.SignIn, s.origin+"/callback"); err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(o.Rest)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	// The three kinds the console watches and decides, without discovery.
	s.mapper = restmap.Namespaced(v1alpha1.GroupVersion.WithKind("ToolApproval"), v1alpha1.GroupVersion.WithKind("MCPServer"),
		v1alpha1.GroupVersion.WithKind("ToolPolicy"))
	if s.cache, err = cache.New(o.Rest, cache.Options{Scheme: o.Scheme, Mapper: s.mapper, HTTPClient: httpClient, DefaultTransform: slim}); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// Scheme holds the project's kinds, the only ones the console's cache and
// impersonating clients read and write. Its typed clients (access reviews,
// Events, the bridge pods' logs) use client-go's own scheme; a second
// registry of every built-in group here would hold about 140 KB of heap
// for kinds the console never decodes (a small saving: the idle RSS does
// not show it beyond its run-to-run variation).
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// slim drops from the watched objects what no page shows, so the console
// holds less: managed fields, kubectl's copy of the applied object, and a
// server's prompts and skills (its tools stay: the catalog and can-i read
// them).
func slim(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a[lastApplied] != "" {
			delete(a, lastApplied)
			o.SetAnnotations(a)
		}
	}
	if s, ok := obj.(*v1alpha1.MCPServer); ok {
		s.Status.Prompts, s.Status.Skills = nil, nil
	}
	return obj, nil
}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Start starts the watches of ToolApprovals, MCPServers and ToolPolicies
// and returns once their caches hold what the API server has. They run
// until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	for topic, obj := range map[string]client.Object{
		topicApprovals: &v1alpha1.ToolApproval{},
		topicServers:   &v1alpha1.MCPServer{},
		topicPolicies:  &v1alpha1.ToolPolicy{},
	} {
		inf, err := s.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("console: while watching %s: %w", topic, err)
		}
		if _, err := inf.AddEventHandler(s.hub.handler(topic)); err != nil {
			return fmt.Errorf("console: while watching %s: %w", topic, err)
		}
	}
	go func() {
		if err := s.cache.Start(ctx); err != nil {
			s.opts.Log.Error(err, "console: the watches stopped")
		}
	}()
	if !s.cache.WaitForCacheSync(ctx) {
		return errors.New("console: the watches did not sync")
	}
	if s.opts.Activity != nil {
		s.opts.Activity.onChange = func(server string) {
			for _, ns := range s.serverNamespaces(ctx)[server] {
				s.hub.publish(notice{topic: topicActivity, namespace: ns})
			}
		}
	}
	return nil
}

// Handler serves the console.
func (s *Server) Handler() http.Handler { return s.handler }

// SignedIn is the number of live sessions (the benchmark reports memory
// per signed-in person).
func (s *Server) SignedIn() int { return s.sessions.count() }

// routes: pages and the event stream need a session; sign-in, static
// files and health do not. Every response carries the security headers.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/approvals", http.StatusSeeOther)
	})
	mux.Handle("GET /approvals", s.page(s.approvalsPage))
	mux.Handle("POST /approvals/{namespace}/{name}", s.change(s.decide))
	mux.Handle("GET /servers", s.page(s.serversPage))
	mux.Handle("GET /servers/{namespace}/{name}", s.page(s.serverPage))
	mux.Handle("GET /policies", s.page(s.policiesPage))
	mux.Handle("GET /activity", s.page(s.activityPage))
	mux.Handle("GET /events", s.withSession(s.events))
	mux.HandleFunc("GET /login", s.login)
	mux.HandleFunc("GET /callback", s.callback)
	mux.Handle("POST /logout", s.change(s.logout))
	mux.Handle("GET /static/", noListing(http.FileServerFS(staticFS)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return s.securityHeaders(mux)
}

// noListing serves files only: a folder's path is not found, rather than
// a list of what the folder holds.
func noListing(files http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy allows the console's own script, styles and event
// stream and nothing else: no inline script, no framing, forms only to
// itself.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// hsts keeps browsers on https for a year once they reached the console
// over it (only then: over http the header means nothing and is ignored).
const hsts = "max-age=31536000"

func (s *Server) securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		// No URL of the console goes to another site (the identity
		// provider, a trace UI); same-origin rather than no-referrer, as
		// with no-referrer browsers send "Origin: null" with a form post,
		// which the Origin check must refuse.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if s.secure {
			h.Set("Strict-Transport-Security", hsts)
		}
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			// Pages hold data of the person signed in: never kept by a
			// browser or a proxy.
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// refreshHeader marks the console script's fetch of the page it shows,
// after the event stream said something changed.
const refreshHeader = "X-Console-Refresh"

// sessionOf returns the request's live session, or nil. What the person
// asks for counts as use and keeps the session from idling out; a live
// page's own refresh does not, or an open tab would keep it forever.
func (s *Server) sessionOf(r *http.Request) *session {
	return s.session(r, r.Header.Get(refreshHeader) == "")
}

func (s *Server) session(r *http.Request, use bool) *session {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	return s.sessions.get(c.Value, use)
}

// withSession refuses a request without a live session (401): the event
// stream, which a page opens by itself, so it is not use of the session.
func (s *Server) withSession(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := s.session(r, false)
		if x == nil {
			http.Error(w, "not signed in", http.StatusUnauthorized)
			return
		}
		h(w, r, x)
	})
}

// change guards every request that changes something: a live session, a
// request from the console's own origin, and the session's CSRF token in
// the form. Any failure changes nothing and says why.
func (s *Server) change(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != s.origin {
			// Browsers send Origin with every form post; one from another
			// site, or none at all, is not a post of the console's pages.
			s.refuse(w, r, http.StatusForbidden, "Refused: this form was not sent from the console's own pages (Origin "+quoteOrNone(origin)+"). Nothing was changed.")
			return
		}
		x := s.sessionOf(r)
		if x == nil {
			s.refuse(w, r, http.StatusForbidden, "Refused: you are not signed in (or your session ended). Nothing was changed; sign in and try again.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			s.refuse(w, r, http.StatusBadRequest, "Refused: the form could not be read. Nothing was changed.")
			return
		}
		if !validCSRF(x, r.PostForm.Get("csrf")) {
			s.refuse(w, r, http.StatusForbidden, "Refused: the form's security token does not match your session (an old page, or a page of another site). Nothing was changed; reload and try again.")
			return
		}
		h(w, r, x)
	})
}

func quoteOrNone(s string) string {
	if s == "" {
		return "missing"
	}
	return fmt.Sprintf("%q", s)
}
