// Package credentials reads the Secrets a remote MCPServer names — a bearer
// token, extra headers, a CA and client certificate — into what a Streamable
// HTTP connection presents. The controller's probe and the bridge's upstream
// connections use the same code, so they reach a server the same way. Values
// lists every Secret value a server is given, which both redact from what
// the server says.
package credentials

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Credentials are what a connection to a remote server presents.
type Credentials struct {
	BearerToken string
	Header      http.Header
	// TLS is nil for the default TLS settings.
	TLS *tls.Config
	// Digest identifies the Secret values read (sha256, hex; empty when
	// none were): it changes when a Secret is rotated, so that the bridge
	// knows to make new connections with the new values.
	Digest string
}

// MissingError says which Secret or key is missing or unusable: the server
// can't be reached until the user fixes it.
type MissingError struct{ Msg string }

func (e *MissingError) Error() string { return e.Msg }

// Read resolves the credentials of a remote server's spec from Secrets in its
// namespace. Servers without spec.remote have none.
func Read(ctx context.Context, c client.Reader, s *v1alpha1.MCPServer) (Credentials, error) {
	var out Credentials
	r := s.Spec.Remote
	if r == nil {
		return out, nil
	}
	d := sha256.New()
	if r.Auth != nil && r.Auth.BearerTokenSecretRef != nil {
		token, err := Value(ctx, c, s.Namespace, *r.Auth.BearerTokenSecretRef)
		if err != nil {
			return out, err
		}
		out.BearerToken = strings.TrimSpace(token)
		digestPart(d, "bearer", out.BearerToken)
	}
	for _, h := range r.HeadersFrom {
		v, err := Value(ctx, c, s.Namespace, h.SecretKeyRef)
		if err != nil {
			return out, err
		}
		if out.Header == nil {
			out.Header = http.Header{}
		}
		out.Header.Set(h.Name, v)
		digestPart(d, "header", h.Name, v)
	}
	if r.Auth != nil && r.Auth.TLSSecretRef != nil {
		cfg, err := tlsConfig(ctx, c, s.Namespace, r.Auth.TLSSecretRef.Name, d)
		if err != nil {
			return out, err
		}
		out.TLS = cfg
	}
	if out.BearerToken != "" || out.Header != nil || out.TLS != nil {
		out.Digest = hex.EncodeToString(d.Sum(nil))
	}
	return out, nil
}

// digestPart adds length-prefixed parts to d, so that no two different
// sequences of values hash alike.
func digestPart(d hash.Hash, parts ...string) {
	for _, p := range parts {
		fmt.Fprintf(d, "%d:%s;", len(p), p)
	}
}

// Value is one key of a Secret in namespace.
func Value(ctx context.Context, c client.Reader, namespace string, ref v1alpha1.SecretKeySelector) (string, error) {
	var secret corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, &secret); err != nil {
		return "", &MissingError{fmt.Sprintf("Secret %s: %v", ref.Name, err)}
	}
	v, ok := secret.Data[ref.Key]
	if !ok {
		return "", &MissingError{fmt.Sprintf("Secret %s has no key %q", ref.Name, ref.Key)}
	}
	return string(v), nil
}

// Values are the values of every Secret key a server's spec gives it: a
// workload's env and envFrom, a remote server's bearer token and headers.
// What the server sends may quote them, so whoever publishes it redacts
// them. An error names what could not be read; values holds the rest.
func Values(ctx context.Context, c client.Reader, s *v1alpha1.MCPServer) (values []string, err error) {
	var errs []error
	add := func(sel v1alpha1.SecretKeySelector) {
		v, err := Value(ctx, c, s.Namespace, sel)
		if err != nil {
			errs = append(errs, err)
			return
		}
		values = append(values, v)
	}
	if wl := s.Spec.Workload; wl != nil {
		for _, e := range wl.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				add(v1alpha1.SecretKeySelector{Name: e.ValueFrom.SecretKeyRef.Name, Key: e.ValueFrom.SecretKeyRef.Key})
			}
		}
		for _, ef := range wl.EnvFrom {
			if ef.SecretRef == nil {
				continue
			}
			var secret corev1.Secret
			if err := c.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ef.SecretRef.Name}, &secret); err != nil {
				errs = append(errs, &MissingError{fmt.Sprintf("Secret %s: %v", ef.SecretRef.Name, err)})
				continue
			}
			for _, v := range secret.Data {
				values = append(values, string(v))
			}
		}
	}
	if r := s.Spec.Remote; r != nil {
		if r.Auth != nil && r.Auth.BearerTokenSecretRef != nil {
			add(*r.Auth.BearerTokenSecretRef)
		}
		if r.Auth != nil && r.Auth.TokenExchange != nil {
			// The bridge's own client secret for the exchange.
			add(v1alpha1.SecretKeySelector{Name: r.Auth.TokenExchange.ClientSecretRef.Name, Key: "client_secret"})
		}
		for _, h := range r.HeadersFrom {
			add(h.SecretKeyRef)
		}
	}
	return values, errors.Join(errs...)
}

// tlsConfig builds client TLS settings from a Secret holding ca.crt and, for
// mutual TLS, tls.crt and tls.key; what it reads is added to d.
func tlsConfig(ctx context.Context, c client.Reader, namespace, name string, d hash.Hash) (*tls.Config, error) {
	var secret corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &secret); err != nil {
		return nil, &MissingError{fmt.Sprintf("Secret %s: %v", name, err)}
	}
	// A Secret named for TLS that holds none of the keys is a mistake (a
	// wrong name, keys spelt otherwise), not a wish for the system's CAs and
	// no client certificate: say so rather than fail the handshake later.
	_, hasCA := secret.Data["ca.crt"]
	_, hasCrt := secret.Data["tls.crt"]
	_, hasKey := secret.Data["tls.key"]
	if !hasCA && !hasCrt && !hasKey {
		return nil, &MissingError{fmt.Sprintf("Secret %s has none of the keys ca.crt, tls.crt, tls.key", name)}
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		digestPart(d, k, string(secret.Data[k]))
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca, ok := secret.Data["ca.crt"]; ok {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, &MissingError{fmt.Sprintf("Secret %s: ca.crt holds no PEM certificate", name)}
		}
		cfg.RootCAs = pool
	}
	crt, key := secret.Data["tls.crt"], secret.Data["tls.key"]
	if hasCrt != hasKey {
		return nil, &MissingError{fmt.Sprintf("Secret %s: tls.crt and tls.key go together", name)}
	}
	if hasCrt {
		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			return nil, &MissingError{fmt.Sprintf("Secret %s: tls.crt/tls.key: %v", name, err)}
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
