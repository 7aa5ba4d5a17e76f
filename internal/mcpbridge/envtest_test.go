package mcpbridge

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// The API server is started once per test binary, on first use.
var apiserver struct {
	once sync.Once
	env  *envtest.Environment
	cfg  *rest.Config
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if apiserver.env != nil {
		_ = apiserver.env.Stop()
	}
	os.Exit(code)
}

// startAPIServer returns envtest's real API server (with service account
// token signing, which envtest configures) and a client for it.
func startAPIServer(t *testing.T) (*rest.Config, *kubernetes.Clientset) {
	t.Helper()
	apiserver.once.Do(func() {
		apiserver.env, apiserver.err = testenv.New()
		if apiserver.err == nil {
			apiserver.cfg, apiserver.err = apiserver.env.Start()
		}
	})
	if apiserver.err != nil {
		t.Fatalf("while starting envtest: %v", apiserver.err)
	}
	cs, err := kubernetes.NewForConfig(apiserver.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return apiserver.cfg, cs
}

func ensureNamespace(t *testing.T, cs *kubernetes.Clientset, name string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

func ensureServiceAccount(t *testing.T, cs *kubernetes.Clientset, namespace, name string) {
	t.Helper()
	ensureNamespace(t, cs, namespace)
	_, err := cs.CoreV1().ServiceAccounts(namespace).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

// saToken asks the API server for a ServiceAccount token (TokenRequest).
func saToken(t *testing.T, cs *kubernetes.Clientset, namespace, name, audience string) string {
	t.Helper()
	ensureServiceAccount(t, cs, namespace, name)
	exp := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// resignedToken is a real token with its expiry moved and signed again with
// the API server's own service account key: the API server's verdict on
// it is real, and no token that short-lived can be requested (TokenRequest's
// minimum is ten minutes).
func resignedToken(t *testing.T, issued string, exp time.Time) string {
	t.Helper()
	parts := strings.Split(issued, ".")
	var header map[string]any
	var claims map[string]any
	mustDecode := func(s string, v any) {
		data, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || json.Unmarshal(data, v) != nil {
			t.Fatalf("the API server's token is not a JWT: %v", err)
		}
	}
	mustDecode(parts[0], &header)
	mustDecode(parts[1], &claims)
	claims["exp"] = exp.Unix()
	claims["iat"] = exp.Add(-20 * time.Minute).Unix()
	claims["nbf"] = exp.Add(-20 * time.Minute).Unix()
	enc := func(v any) string {
		data, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(data)
	}
	signing := enc(header) + "." + enc(claims)
	keyPEM, err := os.ReadFile(filepath.Join(apiserver.env.ControlPlane.APIServer.CertDir, "sa-signer.key"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(keyPEM)
	var key any
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		key = k
	} else if key, err = x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
		t.Fatalf("the service account key cannot be read: %v", err)
	}
	sum := sha256.Sum256([]byte(signing))
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		var err error
		if sig, err = rsa.SignPKCS1v15(nil, k, crypto.SHA256, sum[:]); err != nil {
			t.Fatal(err)
		}
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		// JWS (ES256): r and s as fixed-size big-endian integers.
		size := (k.Curve.Params().BitSize + 7) / 8
		sig = make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
	default:
		t.Fatalf("unexpected service account key type %T", key)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}
