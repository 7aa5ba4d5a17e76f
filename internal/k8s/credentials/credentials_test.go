package credentials

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// selfSigned returns a PEM certificate and key.
func selfSigned(t *testing.T) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func remote(auth *v1alpha1.RemoteAuth, headers ...v1alpha1.HeaderFromSecret) *v1alpha1.MCPServer {
	s := &v1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "far"}}
	s.Spec.Remote = &v1alpha1.Remote{URL: "https://mcp.example.com/mcp", Auth: auth, HeadersFrom: headers}
	return s
}

func secret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: data}
}

// The Secrets are served by controller-runtime's fake client: what is tested
// is how their contents become credentials; reading Secrets from a real API
// server is covered by the controller's and the bridge's envtest suites.
func TestRead(t *testing.T) {
	crt, key := selfSigned(t)
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(
		secret("token", map[string][]byte{"token": []byte("s3cret\n")}),
		secret("api", map[string][]byte{"key": []byte("k-123")}),
		secret("mtls", map[string][]byte{"ca.crt": crt, "tls.crt": crt, "tls.key": key}),
		secret("half", map[string][]byte{"tls.crt": crt}),
		secret("badca", map[string][]byte{"ca.crt": []byte("not pem")}),
		secret("empty", map[string][]byte{"ca.pem": crt}),
	).Build()
	ctx := context.Background()

	creds, err := Read(ctx, c, remote(
		&v1alpha1.RemoteAuth{BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "token", Key: "token"}, TLSSecretRef: &v1alpha1.LocalSecretReference{Name: "mtls"}},
		v1alpha1.HeaderFromSecret{Name: "X-Api-Key", SecretKeyRef: v1alpha1.SecretKeySelector{Name: "api", Key: "key"}}))
	if err != nil {
		t.Fatal(err)
	}
	if creds.BearerToken != "s3cret" || creds.Header.Get("X-Api-Key") != "k-123" {
		t.Errorf("token %q, headers %v", creds.BearerToken, creds.Header)
	}
	if creds.TLS == nil || creds.TLS.RootCAs == nil || len(creds.TLS.Certificates) != 1 {
		t.Errorf("TLS %+v, want the CA and one client certificate", creds.TLS)
	}

	for _, tc := range []struct {
		name string
		auth *v1alpha1.RemoteAuth
		want string
	}{
		{"missing Secret", &v1alpha1.RemoteAuth{BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "nope", Key: "token"}}, "Secret nope"},
		{"missing key", &v1alpha1.RemoteAuth{BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "token", Key: "other"}}, `has no key "other"`},
		{"certificate without key", &v1alpha1.RemoteAuth{TLSSecretRef: &v1alpha1.LocalSecretReference{Name: "half"}}, "tls.crt and tls.key go together"},
		{"CA that is not PEM", &v1alpha1.RemoteAuth{TLSSecretRef: &v1alpha1.LocalSecretReference{Name: "badca"}}, "ca.crt holds no PEM certificate"},
		{"TLS Secret without any of its keys", &v1alpha1.RemoteAuth{TLSSecretRef: &v1alpha1.LocalSecretReference{Name: "empty"}}, "has none of the keys ca.crt, tls.crt, tls.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(ctx, c, remote(tc.auth))
			var missing *MissingError
			if !errors.As(err, &missing) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want a MissingError containing %q", err, tc.want)
			}
		})
	}

	if creds, err := Read(ctx, c, &v1alpha1.MCPServer{}); err != nil || creds.TLS != nil || creds.BearerToken != "" {
		t.Errorf("a workload server has credentials %+v, %v", creds, err)
	}
}

// The digest tells a rotation: it is stable while the Secrets are, and
// changes when any value the credentials hold does.
func TestDigestFollowsRotation(t *testing.T) {
	crt, key := selfSigned(t)
	crt2, key2 := selfSigned(t)
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(
		secret("token", map[string][]byte{"token": []byte("t1")}),
		secret("mtls", map[string][]byte{"ca.crt": crt, "tls.crt": crt, "tls.key": key}),
	).Build()
	ctx := context.Background()
	s := remote(&v1alpha1.RemoteAuth{BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "token", Key: "token"}, TLSSecretRef: &v1alpha1.LocalSecretReference{Name: "mtls"}})
	digest := func() string {
		t.Helper()
		creds, err := Read(ctx, c, s)
		if err != nil {
			t.Fatal(err)
		}
		return creds.Digest
	}
	first := digest()
	if first == "" || digest() != first {
		t.Fatalf("digest %q, then %q: want one, stable", first, digest())
	}
	rotate := func(name string, data map[string][]byte) {
		t.Helper()
		if err := c.Update(ctx, secret(name, data)); err != nil {
			t.Fatal(err)
		}
	}
	rotate("mtls", map[string][]byte{"ca.crt": crt, "tls.crt": crt2, "tls.key": key2})
	second := digest()
	if second == first {
		t.Error("a new client certificate left the digest unchanged")
	}
	rotate("token", map[string][]byte{"token": []byte("t2")})
	if digest() == second {
		t.Error("a new bearer token left the digest unchanged")
	}
	if creds, _ := Read(ctx, c, remote(nil)); creds.Digest != "" {
		t.Errorf("a server without credentials has digest %q", creds.Digest)
	}
}

// Values lists every Secret value a server is given, workload and remote;
// one that can't be read is named in the error and the rest still listed
// (redaction with what could be read beats none).
func TestValues(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(
		secret("env", map[string][]byte{"db": []byte("db-password-1"), "other": []byte("not-given")}),
		secret("all", map[string][]byte{"a": []byte("value-a-1234"), "b": []byte("value-b-5678")}),
		secret("token", map[string][]byte{"token": []byte("bearer-token-1")}),
		secret("api", map[string][]byte{"key": []byte("header-key-1")}),
		secret("client", map[string][]byte{"client_id": []byte("mcp-bridge"), "client_secret": []byte("client-secret-1")}),
	).Build()
	ctx := context.Background()

	wl := &v1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "near"}}
	wl.Spec.Workload = &v1alpha1.Workload{
		Env: []corev1.EnvVar{
			{Name: "PLAIN", Value: "not-a-secret"},
			{Name: "DB", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}, Key: "db"}}},
		},
		EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "all"}}}},
	}
	got, err := Values(ctx, c, wl)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"db-password-1", "value-a-1234", "value-b-5678"}) {
		t.Fatalf("workload values %q, %v", got, err)
	}

	far := remote(&v1alpha1.RemoteAuth{BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "token", Key: "token"}},
		v1alpha1.HeaderFromSecret{Name: "X-Api-Key", SecretKeyRef: v1alpha1.SecretKeySelector{Name: "api", Key: "key"}},
		v1alpha1.HeaderFromSecret{Name: "X-Other", SecretKeyRef: v1alpha1.SecretKeySelector{Name: "gone", Key: "key"}})
	got, err = Values(ctx, c, far)
	slices.Sort(got)
	if !slices.Equal(got, []string{"bearer-token-1", "header-key-1"}) || err == nil || !strings.Contains(err.Error(), "Secret gone") {
		t.Fatalf("remote values %q, %v; want both values and an error naming Secret gone", got, err)
	}

	// A token exchange's client secret is the server's too (its client id
	// is a name, not a secret).
	exchanging := remote(&v1alpha1.RemoteAuth{TokenExchange: &v1alpha1.TokenExchange{
		TokenURL: "https://idp.example.com/token", Audience: "far", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "client"},
	}})
	if got, err = Values(ctx, c, exchanging); err != nil || !slices.Equal(got, []string{"client-secret-1"}) {
		t.Fatalf("token exchange values %q, %v; want the client secret", got, err)
	}
}
