// Package signed seals small values into strings that any bridge replica
// holding the same key can verify, and no one without it can forge: the
// bridge's session ids and the requestState of 2026-07-28 approvals are
// such strings, so a session or a pending question survives the loss of the
// replica that made it without any state shared between replicas.
//
// A sealed string is "<base64url encrypted payload>.<base64url HMAC-SHA256>";
// the MAC covers the purpose too, so a value sealed for one use (a session)
// is refused for another (a requestState). Payloads are encrypted (AES-GCM,
// with a key derived from the sealing key, the purpose as associated data)
// as well as signed: the agent carries them, and a requestState holds what
// a server sent (its own state, the call's arguments), which may be secret.
//
// A sealed value has exactly one spelling: Open accepts only the base64 Seal
// writes (no padding, spare bits of the last character zero, no line
// breaks), so a state that may be used once cannot be used again by
// spelling it differently. Spent remembers used values by their MAC.
package signed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MinKeyBytes is the shortest key accepted.
const MinKeyBytes = 32

// ErrInvalid is returned for a string that was not sealed with this key for
// this purpose, or is malformed.
var ErrInvalid = errors.New("not a valid sealed value")

// Sealer seals and opens values with one key. It is safe for concurrent use.
type Sealer struct {
	key  []byte
	aead cipher.AEAD // encrypts payloads, with a key of its own derived from key
}

// New returns a Sealer with key (at least MinKeyBytes).
func New(key []byte) (*Sealer, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("while setting up signing: the key has %d bytes, at least %d are needed", len(key), MinKeyBytes)
	}
	// The MAC and the cipher must not share a key: the cipher's is the MAC
	// of a fixed label.
	m := hmac.New(sha256.New, key)
	m.Write([]byte("mcp-operator sealed payload encryption"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("while setting up sealing: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("while setting up sealing: %w", err)
	}
	return &Sealer{key: append([]byte(nil), key...), aead: aead}, nil
}

// RandomKey returns a fresh key, for a single replica that shares it with
// no one.
func RandomKey() []byte {
	k := make([]byte, MinKeyBytes)
	_, _ = rand.Read(k)
	return k
}

var enc = base64.RawURLEncoding

// Seal encodes v as JSON, encrypts it and signs it for purpose.
func (s *Sealer) Seal(purpose string, v any) (string, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("while sealing a %s: %w", purpose, err)
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(payload)+s.aead.Overhead())
	_, _ = rand.Read(nonce)
	p := enc.EncodeToString(s.aead.Seal(nonce, nonce, payload, []byte(purpose)))
	return p + "." + enc.EncodeToString(s.mac(purpose, p)), nil
}

// Open verifies sealed for purpose and decodes its payload into v.
func (s *Sealer) Open(purpose, sealed string, v any) error {
	p, sig, ok := strings.Cut(sealed, ".")
	if !ok || len(sealed) > 8192 {
		return ErrInvalid
	}
	got, ok := decode(sig)
	if !ok || !hmac.Equal(got, s.mac(purpose, p)) {
		return ErrInvalid
	}
	payload, ok := decode(p)
	if !ok {
		return ErrInvalid
	}
	if payload, ok = s.decrypt(purpose, payload); !ok || json.Unmarshal(payload, v) != nil {
		return ErrInvalid
	}
	return nil
}

func (s *Sealer) decrypt(purpose string, sealed []byte) ([]byte, bool) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, false
	}
	payload, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(purpose))
	return payload, err == nil
}

// decode reads s only in the spelling enc writes. Go's decoder alone takes
// several spellings of one value: it ignores the spare low bits of the last
// character (so "...Q" and "...R" can decode alike) and skips CR and LF.
func decode(s string) ([]byte, bool) {
	b, err := enc.Strict().DecodeString(s)
	if err != nil || enc.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}

func (s *Sealer) mac(purpose, payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return m.Sum(nil)
}
