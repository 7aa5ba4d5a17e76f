package devidp

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// rsaKey is one RS256 key pair; it serves as op.SigningKey (private half) and op.Key (public half).
type rsaKey struct {
	id      string
	private *rsa.PrivateKey
}

func newRSAKey() (*rsaKey, error) {
	private, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("while generating a signing key: %w", err)
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	return &rsaKey{id: hex.EncodeToString(id), private: private}, nil
}

func (k *rsaKey) ID() string                                  { return k.id }
func (k *rsaKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }

type publicKey struct{ *rsaKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.private.PublicKey }

type signingKey struct{ *rsaKey }

func (k signingKey) Key() any { return k.private }

// keyRing holds the key that signs now and every key still published in the JWKS, so tests can
// rotate (a new key signs, the old one still verifies) and then remove an old key.
type keyRing struct {
	mu        sync.RWMutex
	current   *rsaKey
	published []*rsaKey
}

func newKeyRing() (*keyRing, error) {
	k, err := newRSAKey()
	if err != nil {
		return nil, err
	}
	return &keyRing{current: k, published: []*rsaKey{k}}, nil
}

func (r *keyRing) signing() op.SigningKey {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return signingKey{r.current}
}

func (r *keyRing) public() []op.Key {
	r.mu.RLock()
	defer r.mu.RUnlock()
	keys := make([]op.Key, 0, len(r.published))
	for _, k := range r.published {
		keys = append(keys, publicKey{k})
	}
	return keys
}

func (r *keyRing) rotate() (string, error) {
	k, err := newRSAKey()
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = k
	r.published = append(r.published, k)
	return k.id, nil
}

func (r *keyRing) remove(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current.id == id {
		return fmt.Errorf("key %s signs tokens now: rotate before removing it", id)
	}
	i := slices.IndexFunc(r.published, func(k *rsaKey) bool { return k.id == id })
	if i < 0 {
		return fmt.Errorf("no published key %s", id)
	}
	r.published = slices.Delete(r.published, i, i+1)
	return nil
}

func (r *keyRing) ids() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]string, 0, len(r.published))
	for _, k := range r.published {
		ids = append(ids, k.id)
	}
	return ids
}
