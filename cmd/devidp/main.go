// Command devidp runs the development OAuth 2.1 / OpenID Connect provider (internal/devidp) on its
// own: beside the dev cluster (`make dev`), where desktop MCP clients on this machine and the
// bridge in the cluster reach it at one issuer URL. Test users and secrets only; never for real
// people.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/devidp"
)

type flags struct {
	listen, issuer      string
	certFile, keyFile   string
	consoleRedirects    string
	bridgeResources     string
	allowInsecure       bool
	accessTokenLifetime time.Duration
}

func parse(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("devidp", flag.ContinueOnError)
	fs.StringVar(&f.listen, "listen", ":8080", "address to serve on")
	fs.StringVar(&f.issuer, "issuer", "", "the provider's URL as clients and resource servers reach it (scheme://host[:port], no path); required")
	fs.StringVar(&f.certFile, "tls-cert-file", "", "serve HTTPS with this certificate (PEM); with --tls-key-file")
	fs.StringVar(&f.keyFile, "tls-key-file", "", "the certificate's private key (PEM)")
	fs.BoolVar(&f.allowInsecure, "insecure-http", false, "allow an http issuer on an address that is not loopback (a development cluster reached only from this machine)")
	fs.StringVar(&f.consoleRedirects, "console-redirect-uris", "", "comma-separated redirect URIs the mcp-console client may use besides loopback ones")
	fs.StringVar(&f.bridgeResources, "bridge-resources", "", "comma-separated resource URLs (the bridge's public URL) whose tokens the mcp-bridge client may exchange; without it, none")
	fs.DurationVar(&f.accessTokenLifetime, "access-token-lifetime", time.Hour, "how long access tokens are valid")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if f.issuer == "" {
		return f, errors.New("--issuer is required: the URL clients and resource servers reach the provider at")
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return f, errors.New("--tls-cert-file and --tls-key-file go together")
	}
	if strings.HasPrefix(f.issuer, "https://") != (f.certFile != "") {
		return f, fmt.Errorf("issuer %s: an https issuer needs --tls-cert-file and --tls-key-file, an http one neither", f.issuer)
	}
	return f, nil
}

func main() {
	f, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devidp:", err)
		os.Exit(2)
	}
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "devidp:", err)
		os.Exit(1)
	}
}

func run(f flags) error {
	var redirects []string
	if f.consoleRedirects != "" {
		redirects = strings.Split(f.consoleRedirects, ",")
	}
	var bridge []string
	if f.bridgeResources != "" {
		bridge = strings.Split(f.bridgeResources, ",")
	}
	p, err := devidp.New(devidp.Config{
		Issuer: f.issuer, AllowInsecure: f.allowInsecure, AccessTokenLifetime: f.accessTokenLifetime,
		Clients: devidp.DefaultClients(redirects...), BridgeResources: bridge,
	})
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: f.listen, Handler: p, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() {
		slog.Info("serving the development identity provider", "issuer", p.Issuer(), "listen", f.listen)
		if f.certFile != "" {
			errc <- srv.ListenAndServeTLS(f.certFile, f.keyFile)
		} else {
			errc <- srv.ListenAndServe()
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}
