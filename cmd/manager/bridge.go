package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/mcp-operator/mcp-operator/internal/approval"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/servingcert"
	"github.com/mcp-operator/mcp-operator/internal/tracing"
	"github.com/mcp-operator/mcp-operator/internal/version"
)

// bridgeFlags are the settings of `manager bridge`.
type bridgeFlags struct {
	listen            string
	opsListen         string
	pprofListen       string
	namespaces        string
	toolNameStyle     string
	insecureAnonymous bool
	sessionKeyFile    string
	auditLog          string
	auditArgs         string
	artifactDir       string
	artifactRetention time.Duration
	artifactMaxSize   string
	maxResultBytes    int
	maxBodyBytes      int64
	bodyBytesInFlight int64
	maxConcurrent     int
	sessionConcurrent int
	callerConcurrent  int
	callerSessions    int
	upstreamSessions  int
	callTimeout       time.Duration
	idleTimeout       time.Duration
	shutdownDelay     time.Duration
	allowedHosts      string
	publicURL         string
	allowedOrigins    string
	blockInjection    bool
	toolApprovals     bool
	webhookURL        string
	webhookSecretFile string
	tlsCertFile       string
	tlsKeyFile        string
	// OAuth: the issuers whose access tokens are accepted beside
	// ServiceAccount tokens.
	authenticationConfig string
	oidcIssuerURL        string
	requiredScopes       string
	oauthAllowHTTP       bool
	tokenExchangeURLs    string
	zap                  zap.Options
}

func parseBridgeFlags(args []string, stderr io.Writer) (bridgeFlags, error) {
	var f bridgeFlags
	fs := flag.NewFlagSet("manager bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.listen, "listen", ":8443", "address agents connect to (/mcp, /servers/<name>/mcp)")
	fs.StringVar(&f.listen, "bind-address", ":8443", "the same as --listen (the name the chart uses)")
	fs.StringVar(&f.opsListen, "metrics-bind-address", "", "address of /metrics, /healthz and /readyz, apart from the agents' port: for Prometheus and the kubelet, not for agents (default: the --listen host, port 8091)")
	fs.StringVar(&f.pprofListen, "pprof-bind-address", "", "address of Go's profiles (/debug/pprof/), for finding where memory or time goes; empty: off. Keep it on loopback (127.0.0.1:6060) and reach it from inside the pod's network namespace: profiles name code and data")
	fs.StringVar(&f.namespaces, "namespaces", os.Getenv("POD_NAMESPACE"), "comma-separated namespaces whose MCPServers and ToolPolicies the bridge serves (default: $POD_NAMESPACE)")
	fs.StringVar(&f.toolNameStyle, "tool-name-style", mcpbridge.StyleDotted, "how /mcp names tools: dotted (mcp.<server>.<tool>) or underscore (mcp__<server>__<tool>, for clients that reject dots)")
	fs.BoolVar(&f.insecureAnonymous, "insecure-anonymous", false, "accept requests without a token as system:anonymous; local development only")
	fs.StringVar(&f.sessionKeyFile, "session-key-file", "", "file with the key (at least 32 bytes) that seals session ids, shared by all replicas (a mounted Secret); without it sessions do not survive this replica")
	fs.StringVar(&f.auditLog, "audit-log", "stdout", "where audit events go: stdout or a file path")
	fs.StringVar(&f.auditArgs, "audit-args", "preview", "how much of call arguments audit events show: full, preview or none")
	fs.StringVar(&f.artifactDir, "artifact-dir", "", "directory (or PVC mount) for results over --max-result-bytes (default: a directory under $TMPDIR)")
	fs.DurationVar(&f.artifactRetention, "artifact-retention", artifact.DefaultMaxAge, "how long an artifact is kept after it was last stored")
	fs.StringVar(&f.artifactMaxSize, "artifact-max-size", resource.NewQuantity(artifact.DefaultMaxBytes, resource.BinarySI).String(), "most the artifact store holds (a quantity: 900Mi, 10Gi); past it, results over --max-result-bytes fail. Keep it under the volume's size")
	fs.IntVar(&f.maxResultBytes, "max-result-bytes", output.DefaultMaxResultBytes, "largest result passed to an agent whole; larger ones go to the artifact store")
	fs.Int64Var(&f.maxBodyBytes, "max-body-bytes", mcpbridge.DefaultMaxBodyBytes, "largest request body accepted")
	fs.Int64Var(&f.bodyBytesInFlight, "max-body-bytes-in-flight", mcpbridge.DefaultMaxBodyBytesInFlight, "request body bytes this replica holds at once, all requests together (at least --max-body-bytes); past it a request is answered 503")
	fs.IntVar(&f.maxConcurrent, "max-concurrent-requests", mcpbridge.DefaultMaxConcurrent, "requests served at once by this replica")
	fs.IntVar(&f.sessionConcurrent, "max-session-requests", session.DefaultMaxConcurrent, "requests in flight at once in one session")
	fs.IntVar(&f.callerConcurrent, "max-caller-requests", 4*session.DefaultMaxConcurrent, "requests in flight at once from one caller, in all its sessions or none")
	fs.IntVar(&f.callerSessions, "max-caller-sessions", session.DefaultMaxPerSubject, "legacy-era sessions one caller may hold open on this replica")
	fs.IntVar(&f.upstreamSessions, "max-upstream-sessions", upstream.DefaultMaxAgentSessions, "upstream sessions this replica opens on one MCP server for session-era agent sessions; at it an idle one is closed, the caller's own first (another caller's only if that caller holds more), and with none it may close a session-only server's call is refused (mcp_server_busy)")
	fs.DurationVar(&f.callTimeout, "call-timeout", mcpbridge.DefaultCallTimeout, "deadline of a call forwarded to an MCP server")
	fs.DurationVar(&f.idleTimeout, "session-idle-timeout", session.DefaultIdleTimeout, "a session not used this long ends")
	fs.DurationVar(&f.shutdownDelay, "shutdown-delay", mcpbridge.DefaultShutdownDelay, "after SIGTERM, how long to go on serving (readyz failing, each answer with Connection: close) before refusing new connections, so the Service stops sending agents here first")
	fs.StringVar(&f.publicURL, "public-url", "", "where agents reach the bridge (scheme and host, as https://bridge.example.com): the base of the URLs server cards give; empty: cards give paths alone")
	fs.StringVar(&f.allowedHosts, "allowed-hosts", "", "comma-separated Host values accepted (DNS rebinding protection); empty accepts any, or only loopback names when listening on loopback")
	fs.StringVar(&f.allowedOrigins, "allowed-origins", "", "comma-separated Origin values accepted from browsers; requests without Origin always pass")
	fs.BoolVar(&f.blockInjection, "block-injection", false, "withhold every result in which the injection scan finds instructions to the model, whatever the ToolPolicies say (findings are always recorded in the audit event; without this flag, rules with injection: Block decide per tool and prompt)")
	fs.BoolVar(&f.toolApprovals, "tool-approvals", true, "create ToolApprovals for requests a policy asks about through the ToolApproval channel, and wait for a person's decision (off: that channel is never used)")
	fs.StringVar(&f.webhookURL, "approval-webhook-url", "", "URL that receives each pending ToolApproval and each decision as JSON (empty: none)")
	fs.StringVar(&f.webhookSecretFile, "approval-webhook-secret-file", "", "file with the shared secret (at least 16 bytes) that signs webhook bodies (header X-MCP-Operator-Signature); required with --approval-webhook-url")
	fs.StringVar(&f.tlsCertFile, "tls-cert-file", "", "serve agents over HTTPS with this certificate (PEM, as tls.crt of a Secret), read again when the file changes: a rotated certificate is served on the next connection without a restart; with --tls-key-file")
	fs.StringVar(&f.tlsKeyFile, "tls-key-file", "", "the serving certificate's private key (PEM, as tls.key of a Secret)")
	fs.StringVar(&f.authenticationConfig, "authentication-config", "", "file with an AuthenticationConfiguration (apiserver.config.k8s.io/v1 or v1beta1): the OAuth issuers whose access tokens the bridge accepts beside ServiceAccount tokens, with their claim mappings; needs --public-url")
	fs.StringVar(&f.oidcIssuerURL, "oidc-issuer-url", "", "accept the access tokens of this one issuer, username from sub and groups from groups, both prefixed oidc: (the short form of --authentication-config); needs --public-url")
	fs.StringVar(&f.requiredScopes, "required-scopes", "", "comma-separated scopes every OAuth access token must carry (a token lacking one is answered 403 insufficient_scope); advertised in the protected resource metadata")
	fs.StringVar(&f.tokenExchangeURLs, "token-exchange-endpoints", "", "comma-separated token endpoint URLs that servers' spec.remote.auth.tokenExchange may name besides the configured issuers' own token_endpoint (for callers no configured issuer signs, such as ServiceAccounts); any other tokenURL is refused, so that no MCPServer author can collect callers' tokens")
	fs.BoolVar(&f.oauthAllowHTTP, "oauth-allow-http", false, "accept http:// issuers and an http:// --public-url on hosts that are not loopback: development clusters only, tokens and keys then cross the network in clear text")
	f.zap.BindFlags(fs)
	err := fs.Parse(args)
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments: %v", fs.Args())
	case f.opsListen == "" && !opsOnListenHost(&f):
		err = fmt.Errorf("--listen %q is not host:port, so --metrics-bind-address cannot default to its host: set it", f.listen)
	case f.opsListen == f.listen:
		err = fmt.Errorf("--metrics-bind-address must differ from --listen (%s): metrics are not served on the agents' port", f.listen)
	case f.upstreamSessions < 1:
		err = fmt.Errorf("--max-upstream-sessions must be at least 1, not %d", f.upstreamSessions)
	case len(splitList(f.namespaces)) == 0:
		err = errors.New("--namespaces (or $POD_NAMESPACE) is required")
	case f.maxBodyBytes <= 0 || f.bodyBytesInFlight < f.maxBodyBytes:
		err = fmt.Errorf("--max-body-bytes must be positive and --max-body-bytes-in-flight at least as large, not %d and %d", f.maxBodyBytes, f.bodyBytesInFlight)
	case f.toolNameStyle != mcpbridge.StyleDotted && f.toolNameStyle != mcpbridge.StyleUnderscore:
		err = fmt.Errorf("--tool-name-style must be dotted or underscore, not %q", f.toolNameStyle)
	case (f.tlsCertFile == "") != (f.tlsKeyFile == ""):
		err = errors.New("--tls-cert-file and --tls-key-file go together")
	case (f.webhookURL == "") != (f.webhookSecretFile == ""):
		err = errors.New("--approval-webhook-url and --approval-webhook-secret-file go together")
	case f.webhookURL != "" && !f.toolApprovals:
		err = errors.New("--approval-webhook-url needs --tool-approvals")
	case f.publicURL != "" && !isOrigin(f.publicURL):
		err = fmt.Errorf("--public-url must be http(s)://host[:port] with no path, not %q", f.publicURL)
	case f.authenticationConfig != "" && f.oidcIssuerURL != "":
		err = errors.New("--authentication-config and --oidc-issuer-url are two ways to name issuers: give one (several issuers go in the configuration file)")
	case (f.authenticationConfig != "" || f.oidcIssuerURL != "") && f.publicURL == "":
		err = errors.New("OAuth (--authentication-config or --oidc-issuer-url) needs --public-url: the bridge's URL as clients use it, which tokens must be minted for")
	case (f.authenticationConfig != "" || f.oidcIssuerURL != "") && f.insecureAnonymous:
		err = errors.New("--insecure-anonymous accepts every request, so OAuth (--authentication-config or --oidc-issuer-url) would check nothing: give one or the other")
	case f.requiredScopes != "" && f.authenticationConfig == "" && f.oidcIssuerURL == "":
		err = errors.New("--required-scopes applies to OAuth access tokens: it needs --authentication-config or --oidc-issuer-url")
	case badScope(f.requiredScopes) != "":
		err = fmt.Errorf("--required-scopes: %q is not a scope: a scope is printable ASCII without spaces, quotes or backslashes (RFC 6749), and scopes are separated by commas", badScope(f.requiredScopes))
	case (f.authenticationConfig != "" || f.oidcIssuerURL != "") && !f.oauthAllowHTTP && !httpsOrLoopback(f.publicURL):
		err = fmt.Errorf("--public-url %q is http on a host that is not loopback: OAuth clients send their tokens only over https (a development cluster may allow it with --oauth-allow-http)", f.publicURL)
	case f.shutdownDelay < 0 || stopBounds(f).Total() > mcpbridge.MaxStop:
		err = fmt.Errorf("--shutdown-delay must be between 0s and %s, not %s: the whole stop (%s with it) must stay within %s, under the chart's terminationGracePeriodSeconds (30)",
			mcpbridge.MaxStop-stopBounds(bridgeFlags{}).Total(), f.shutdownDelay, stopBounds(f).Total(), mcpbridge.MaxStop)
	}
	if err == nil {
		_, err = audit.ParseArgsMode(f.auditArgs)
	}
	if err == nil {
		_, err = artifactMaxBytes(f.artifactMaxSize)
	}
	if err == nil && f.artifactRetention <= 0 {
		err = fmt.Errorf("--artifact-retention must be positive, not %s", f.artifactRetention)
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, "manager bridge:", err)
	}
	return f, err
}

// defaultOpsPort is the ops listener's port when --metrics-bind-address is
// not given.
const defaultOpsPort = "8091"

// opsOnListenHost defaults the ops listener to the host the agents' one
// binds, so a bridge on loopback (dev mode) does not serve /metrics on
// every interface.
func opsOnListenHost(f *bridgeFlags) bool {
	host, _, err := net.SplitHostPort(f.listen)
	if err != nil {
		return false
	}
	f.opsListen = net.JoinHostPort(host, defaultOpsPort)
	return true
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// artifactMaxBytes reads --artifact-max-size.
func artifactMaxBytes(size string) (int64, error) {
	q, err := resource.ParseQuantity(size)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("--artifact-max-size must be a positive quantity such as 900Mi, not %q", size)
	}
	return q.Value(), nil
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runBridge(args []string, _, stderr io.Writer) int {
	f, err := parseBridgeFlags(args, stderr)
	if err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap), zap.WriteTo(stderr)))
	log := ctrl.Log.WithName("bridge")
	log.Info("starting bridge", "version", version.String(), "namespaces", f.namespaces, "listen", f.listen, "metricsListen", f.opsListen)

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(stderr, "manager bridge: while loading the Kubernetes client configuration: %v\n", err)
		return 1
	}
	opts, closeSink, err := bridgeOptions(f, log)
	if err != nil {
		fmt.Fprintf(stderr, "manager bridge: %v\n", err)
		return 1
	}
	defer closeSink()
	opts.Rest = cfg
	ctx := ctrl.SetupSignalHandler()
	tp, err := tracing.Setup(ctx, "mcp-operator-bridge", version.String())
	if err != nil {
		fmt.Fprintf(stderr, "manager bridge: %v\n", err)
		return 1
	}
	log.Info("tracing", "enabled", tp.Enabled())
	opts.Bridge.Tracer = tp.Tracer("github.com/mcp-operator/mcp-operator/internal/mcpbridge")
	// The caches and watches live until the stop is over, not until
	// SIGTERM: during the delay and the drain the replica still serves, and
	// must see a ToolApproval decided, a policy changed, a session ended.
	runCtx, stopRuntime := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuntime()
	rt, err := mcpbridge.Start(runCtx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "manager bridge: %v\n", err)
		return 1
	}
	srv := mcpbridge.NewServer(f.listen, rt.Handler)
	serve := srv.ListenAndServe
	if f.tlsCertFile != "" {
		cert, err := servingcert.New(f.tlsCertFile, f.tlsKeyFile, func(err error) {
			log.Error(err, "the changed serving certificate does not load; serving the previous one")
		})
		if err != nil {
			fmt.Fprintf(stderr, "manager bridge: %v\n", err)
			return 1
		}
		srv.TLSConfig = cert.TLSConfig()
		serve = func() error { return srv.ListenAndServeTLS("", "") }
	}
	// The ops port stays plain HTTP: the kubelet's probes and Prometheus
	// reach it inside the cluster, and it carries no tokens.
	ops := mcpbridge.NewServer(f.opsListen, rt.OpsHandler)
	opsFailed := make(chan error, 1)
	go func() {
		if err := ops.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opsFailed <- err
			_ = srv.Close()
		}
	}()
	if f.pprofListen != "" {
		go servePprof(f.pprofListen, log)
	}
	// ListenAndServe returns as soon as the drain starts; the process must
	// live on until the calls in flight are answered, the upstream sessions
	// ended and the audit flushed: Stop does each within its bound, all
	// within the chart's terminationGracePeriodSeconds (30).
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		bounds := stopBounds(f)
		log.Info("stopping", "within", bounds.Total())
		if err := rt.Bridge.Stop(srv, rt.Registry, rt.Audit, tp.Shutdown, bounds); err != nil {
			fmt.Fprintf(stderr, "manager bridge: while stopping: %v\n", err)
		}
		stopRuntime()
		octx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = ops.Shutdown(octx)
	}()
	if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "manager bridge: while serving %s: %v\n", f.listen, err)
		return 1
	}
	select {
	case err := <-opsFailed:
		fmt.Fprintf(stderr, "manager bridge: while serving %s: %v\n", f.opsListen, err)
		return 1
	default:
	}
	<-stopped
	return 0
}

// stopBounds are the bounds of the replica's stop with f's --shutdown-delay.
func stopBounds(f bridgeFlags) mcpbridge.StopBounds {
	bounds := mcpbridge.DefaultStopBounds
	bounds.Delay = f.shutdownDelay
	return bounds
}

// bridgeOptions turns flags into the bridge's options (everything but the
// API server connection).
func bridgeOptions(f bridgeFlags, log interface {
	Info(string, ...any)
}) (mcpbridge.Options, func(), error) {
	closeSink := func() {}
	o := mcpbridge.Options{Namespaces: splitList(f.namespaces), ArtifactDir: f.artifactDir, MaxResultBytes: f.maxResultBytes}
	if o.ArtifactDir == "" {
		o.ArtifactDir = filepath.Join(os.TempDir(), "mcp-bridge-artifacts")
	}
	o.ArgsMode, _ = audit.ParseArgsMode(f.auditArgs)
	o.ArtifactLimits.MaxAge = f.artifactRetention
	o.ArtifactLimits.MaxBytes, _ = artifactMaxBytes(f.artifactMaxSize)
	if f.auditLog != "stdout" && f.auditLog != "" {
		file, err := audit.OpenFile(f.auditLog)
		if err != nil {
			return o, closeSink, err
		}
		o.AuditSink = file
	}
	if f.sessionKeyFile != "" {
		key, err := os.ReadFile(f.sessionKeyFile)
		if err != nil {
			return o, closeSink, fmt.Errorf("while reading --session-key-file: %w", err)
		}
		o.SessionKey = []byte(strings.TrimSpace(string(key)))
	} else {
		log.Info("WARNING: no --session-key-file: session ids are sealed with a random key of this replica, so legacy-era sessions do not survive its loss and other replicas refuse them")
	}
	if f.insecureAnonymous {
		log.Info("WARNING: --insecure-anonymous: every request is accepted WITHOUT AUTHENTICATION as system:anonymous. For local development only; never expose this bridge.")
		o.Auth = authn.Anonymous{}
	}
	auth, err := authenticationConfig(f)
	if err != nil {
		return o, closeSink, err
	}
	o.Authentication = auth
	if auth != nil {
		for _, w := range auth.Warnings() {
			log.Info("WARNING: " + w)
		}
	}
	o.RequiredScopes = splitList(f.requiredScopes)
	o.OAuthAllowHTTP = f.oauthAllowHTTP
	o.TokenExchangeEndpoints = splitList(f.tokenExchangeURLs)
	o.ToolApprovals = f.toolApprovals
	// Replicas record single uses of sealed states in their own namespace.
	if o.OnceNamespace = os.Getenv("POD_NAMESPACE"); o.OnceNamespace == "" {
		log.Info("WARNING: no $POD_NAMESPACE: single use of sealed states (allow once) and session ends (DELETE) are remembered per replica: a state replayed to another replica runs there once more, and an ended session works there until its maximum age")
	}
	if f.webhookURL != "" {
		secret, err := os.ReadFile(f.webhookSecretFile)
		if err != nil {
			return o, closeSink, fmt.Errorf("while reading --approval-webhook-secret-file: %w", err)
		}
		wh, err := approval.NewWebhook(f.webhookURL, []byte(strings.TrimSpace(string(secret))))
		if err != nil {
			return o, closeSink, err
		}
		o.ApprovalNotifier = wh
	}
	o.Session = session.Options{IdleTimeout: f.idleTimeout, MaxConcurrent: f.sessionConcurrent, MaxPerSubject: f.callerSessions}
	o.MaxUpstreamSessions = f.upstreamSessions
	o.Bridge = mcpbridge.Config{
		ToolNameStyle: f.toolNameStyle, MaxBodyBytes: f.maxBodyBytes, MaxBodyBytesInFlight: f.bodyBytesInFlight, MaxConcurrent: f.maxConcurrent,
		MaxSubjectConcurrent: f.callerConcurrent, CallTimeout: f.callTimeout, PublicURL: f.publicURL, AllowedHosts: splitList(f.allowedHosts), AllowedOrigins: splitList(f.allowedOrigins),
		LoopbackOnly:   isLoopback(f.listen) || f.insecureAnonymous && len(splitList(f.allowedHosts)) == 0,
		BlockInjection: f.blockInjection, Version: version.String(),
	}
	return o, closeSink, nil
}

// authenticationConfig loads the OAuth issuers of --authentication-config
// or --oidc-issuer-url (nil: ServiceAccount tokens only).
func authenticationConfig(f bridgeFlags) (*identity.Config, error) {
	return loadIssuers(f.authenticationConfig, f.oidcIssuerURL, f.oauthAllowHTTP)
}

// loadIssuers reads the issuers of an AuthenticationConfiguration file or,
// without one, of the one-issuer shortcut, the same way for the bridge and
// the console (nil when neither is given); allowHTTP admits http issuers
// off loopback (a development cluster).
func loadIssuers(file, issuerURL string, allowHTTP bool) (*identity.Config, error) {
	var opts []identity.Option
	if allowHTTP {
		opts = append(opts, identity.AllowInsecureIssuers())
	}
	switch {
	case file != "":
		return identity.LoadAuthenticationConfig(file, opts...)
	case issuerURL != "":
		return identity.IssuerConfig(issuerURL, opts...)
	}
	return nil, nil
}

// badScope is the first of the comma-separated scopes that is not an RFC
// 6749 scope-token (%x21 / %x23-5B / %x5D-7E: printable ASCII but space,
// " and \), "" when all are. A scope is written into the WWW-Authenticate
// challenge and the metadata as it is.
func badScope(list string) string {
	for _, s := range splitList(list) {
		for _, c := range s {
			if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return s
			}
		}
	}
	return ""
}

// httpsOrLoopback says whether the URL u is https, or http on loopback.
func httpsOrLoopback(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "https" || identity.IsLoopbackHost(p.Hostname()))
}

// isOrigin says whether s is a scheme and host alone, as --public-url is.
func isOrigin(s string) bool {
	u, err := url.Parse(strings.TrimSuffix(s, "/"))
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Path == "" &&
		u.RawQuery == "" && u.Fragment == "" && u.User == nil
}
