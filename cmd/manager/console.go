package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/mcp-operator/mcp-operator/internal/binpages"
	"github.com/mcp-operator/mcp-operator/internal/console"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/version"
)

// consoleFlags are the settings of `manager console`.
type consoleFlags struct {
	listen           string
	publicURL        string
	authConfig       string
	issuerURL        string
	insecureIssuers  bool
	insecureHTTP     bool
	clientID         string
	clientSecretFile string
	scopes           string
	sessionMaxAge    time.Duration
	sessionIdle      time.Duration
	traceURL         string
	auditNamespace   string
	auditSelector    string
	auditContainer   string
	activityKeep     time.Duration
	activityMax      int
	releaseIdle      time.Duration
	zap              zap.Options
}

func parseConsoleFlags(args []string, stderr io.Writer) (consoleFlags, error) {
	var f consoleFlags
	fs := flag.NewFlagSet("manager console", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.listen, "listen", ":8080", "address people's browsers connect to (behind the Service)")
	fs.StringVar(&f.publicURL, "public-url", "", "where people reach the console (http(s)://host[:port]): the identity provider redirects to <public-url>/callback, and forms are accepted only from this origin; cookies are Secure unless it is http:// on loopback")
	fs.StringVar(&f.authConfig, "authentication-config", "", "the bridge's AuthenticationConfiguration file: the issuer people sign in with (--oidc-issuer-url, or the first jwt entry) and its claim mappings, so a person is named as the bridge names them")
	fs.StringVar(&f.issuerURL, "oidc-issuer-url", "", "the issuer people sign in with; without --authentication-config, mapped as the bridge's shortcut maps it (sub and groups, prefixed oidc:)")
	fs.BoolVar(&f.insecureHTTP, "insecure-http", false, "accept an http:// --public-url on a host other than loopback; session cookies are then not Secure and cross the network in clear text (a development cluster reached from its own machine only)")
	fs.BoolVar(&f.insecureIssuers, "insecure-issuer", false, "accept an http:// issuer on a host other than loopback (a development cluster only)")
	fs.StringVar(&f.clientID, "oidc-client-id", "mcp-console", "the console's OAuth client at the issuer")
	fs.StringVar(&f.clientSecretFile, "oidc-client-secret-file", "", "file with the client's secret (a mounted Secret); empty for a public client")
	fs.StringVar(&f.scopes, "oidc-scopes", "profile,email", "comma-separated scopes asked for besides openid (add the one your issuer puts groups under)")
	fs.DurationVar(&f.sessionMaxAge, "session-max-age", console.DefaultSessionMaxAge, "a session ends this long after sign-in")
	fs.DurationVar(&f.sessionIdle, "session-idle-timeout", console.DefaultSessionIdle, "a session unused this long ends")
	fs.StringVar(&f.traceURL, "trace-url", "", "link of a trace in the trace UI, {traceId} replaced by the id (e.g. http://localhost:16686/trace/{traceId}); empty: trace ids are shown, not linked")
	fs.StringVar(&f.auditNamespace, "audit-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the bridge pods whose audit stream (stdout) the activity page shows (default: $POD_NAMESPACE)")
	fs.StringVar(&f.auditSelector, "audit-pod-selector", "app.kubernetes.io/name=mcp-operator,app.kubernetes.io/component=bridge", "label selector of the bridge pods; empty: no activity page")
	fs.StringVar(&f.auditContainer, "audit-container", "bridge", "the bridge pods' container writing the audit stream")
	fs.DurationVar(&f.activityKeep, "activity-keep", console.DefaultActivityKeep, "how far back the activity page goes (kept in memory)")
	fs.IntVar(&f.activityMax, "activity-max-calls", console.DefaultActivityMax, "most calls the activity page keeps in memory")
	fs.DurationVar(&f.releaseIdle, "release-when-idle-for", 5*time.Minute, "once no page has been requested or open for this long, return the heap's free memory and unmap the binary's pages again (what serving ran), as after the start; 0: only after the start")
	f.zap.BindFlags(fs)
	err := fs.Parse(args)
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments: %v", fs.Args())
	case f.publicURL == "":
		err = errors.New("--public-url is required: where people's browsers reach the console")
	case !isOrigin(f.publicURL):
		err = fmt.Errorf("--public-url must be http(s)://host[:port] with no path, not %q", f.publicURL)
	case strings.HasPrefix(f.publicURL, "http://") && !loopbackURL(f.publicURL) && !f.insecureHTTP:
		err = fmt.Errorf("--public-url %s is plain http on a host other than loopback: session cookies would cross the network in clear text; serve the console over https (--insecure-http only for a development cluster)", f.publicURL)
	case f.authConfig == "" && f.issuerURL == "":
		err = errNoSignInIssuer
	case f.sessionMaxAge <= 0 || f.sessionIdle <= 0:
		err = errors.New("--session-max-age and --session-idle-timeout must be positive")
	case f.traceURL != "" && !strings.Contains(f.traceURL, "{traceId}"):
		err = fmt.Errorf("--trace-url must hold {traceId}, not %q", f.traceURL)
	case f.releaseIdle < 0 || (f.releaseIdle > 0 && f.releaseIdle < time.Second):
		err = fmt.Errorf("--release-when-idle-for must be 0 (only after the start) or at least 1s, not %s", f.releaseIdle)
	case f.auditSelector != "" && f.auditNamespace == "":
		err = errors.New("--audit-namespace (or $POD_NAMESPACE) is required with --audit-pod-selector")
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, "manager console:", err)
	}
	return f, err
}

// errNoSignInIssuer: the console has no issuer to send people to.
var errNoSignInIssuer = errors.New("give --authentication-config (the bridge's) or --oidc-issuer-url: the issuer people sign in with")

func loopbackURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && identity.IsLoopbackHost(u.Hostname())
}

// signInIssuer is the issuer people sign in with and the mapping of its
// claims, from the bridge's configuration or the shortcut.
func signInIssuer(f consoleFlags) (identity.JWTAuthenticator, error) {
	cfg, err := loadIssuers(f.authConfig, f.issuerURL, f.insecureIssuers)
	if err == nil && cfg == nil {
		err = errNoSignInIssuer // parseConsoleFlags refuses this first
	}
	if err != nil {
		return identity.JWTAuthenticator{}, err
	}
	for _, j := range cfg.JWT {
		if f.issuerURL == "" || j.Issuer.URL == f.issuerURL {
			return j, nil
		}
	}
	return identity.JWTAuthenticator{}, fmt.Errorf("--oidc-issuer-url %s is not an issuer of %s", f.issuerURL, f.authConfig)
}

// issuerClient trusts the issuer's CA when the configuration names one.
func issuerClient(j identity.JWTAuthenticator) (*http.Client, error) {
	if j.Issuer.CertificateAuthority == "" {
		return &http.Client{Timeout: 30 * time.Second}, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(j.Issuer.CertificateAuthority)) {
		return nil, errors.New("the issuer's certificateAuthority holds no PEM certificate")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}, nil
}

func runConsole(args []string, _, stderr io.Writer) int {
	f, err := parseConsoleFlags(args, stderr)
	if err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap), zap.WriteTo(stderr)))
	log := ctrl.Log.WithName("console")
	log.Info("starting console", "version", version.String(), "listen", f.listen, "publicURL", f.publicURL)
	if f.insecureHTTP && strings.HasPrefix(f.publicURL, "http://") {
		log.Info("WARNING: --insecure-http: session cookies are not Secure and cross the network in clear text. For a development cluster only.")
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "manager console: %v\n", err)
		return 1
	}
	jwt, err := signInIssuer(f)
	if err != nil {
		return fail(err)
	}
	mapper, err := identity.NewMapper(jwt)
	if err != nil {
		return fail(err)
	}
	hc, err := issuerClient(jwt)
	if err != nil {
		return fail(err)
	}
	secret := ""
	if f.clientSecretFile != "" {
		b, err := os.ReadFile(f.clientSecretFile)
		if err != nil {
			return fail(fmt.Errorf("while reading --oidc-client-secret-file: %w", err))
		}
		secret = strings.TrimSpace(string(b))
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fail(fmt.Errorf("while loading the Kubernetes client configuration: %w", err))
	}
	ctx := ctrl.SetupSignalHandler()
	var activity *console.Activity
	if f.auditSelector != "" {
		activity = console.NewActivity(f.activityMax, f.activityKeep)
	}
	srv, err := console.New(ctx, console.Options{
		Rest: cfg, PublicURL: f.publicURL, Mapper: mapper, Log: log,
		SignIn:        console.SignInOptions{IssuerURL: jwt.Issuer.URL, ClientID: f.clientID, ClientSecret: secret, Scopes: splitList(f.scopes), HTTPClient: hc},
		SessionMaxAge: f.sessionMaxAge, SessionIdle: f.sessionIdle, TraceURL: f.traceURL, Activity: activity,
	})
	if err != nil {
		return fail(err)
	}
	if err := srv.Start(ctx); err != nil {
		return fail(err)
	}
	// The watches' first lists leave megabytes of decoded garbage the
	// runtime would keep for reuse, and the start ran pages of the binary
	// (package inits of everything linked into the one manager binary,
	// every subcommand's flags) that serving never runs: about 27 MB of
	// the idle RSS otherwise. Give both back before serving.
	releaseMemory(log, "start")
	handler := srv.Handler()
	if f.releaseIdle > 0 {
		// Serving maps its code again and grows the heap; a console people
		// have left keeps both until the kernel or the runtime takes them.
		// Once it is unused, give them back as after the start.
		watch := newIdleWatch()
		handler = watch.wrap(handler, "/healthz")
		go watch.run(ctx, f.releaseIdle, func() { releaseMemory(log, "idle") })
	}
	if activity != nil {
		cs, err := corev1client.NewForConfig(cfg)
		if err != nil {
			return fail(err)
		}
		go activity.FollowPods(ctx, cs, f.auditNamespace, f.auditSelector, f.auditContainer, log.Info)
	}
	hs := &http.Server{Addr: f.listen, Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	log.Info("serving", "url", f.publicURL)
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(fmt.Errorf("while serving %s: %w", f.listen, err))
	}
	return 0
}

// releaseMemory returns the heap's free pages to the system and unmaps the
// binary's read-only pages; what the process uses next is mapped again at
// its use. It lowers the process's RSS only: the binary's pages stay in
// the page cache, charged to the pod's memory as before.
func releaseMemory(log logr.Logger, when string) {
	debug.FreeOSMemory()
	if released, err := binpages.Release(); err != nil {
		log.Info("the binary's pages stay mapped", "when", when, "reason", err.Error())
	} else {
		log.V(1).Info("unmapped the binary's pages", "when", when, "bytes", released)
	}
}
