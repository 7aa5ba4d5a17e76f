package signed

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type claims struct {
	Sub string `json:"sub"`
	N   int    `json:"n"`
}

func TestSealOpen(t *testing.T) {
	key := []byte(strings.Repeat("k", MinKeyBytes))
	s, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Seal("session", claims{"alice", 7})
	if err != nil {
		t.Fatal(err)
	}
	var got claims
	if err := s.Open("session", sealed, &got); err != nil || got != (claims{"alice", 7}) {
		t.Fatalf("Open = %+v, %v", got, err)
	}
	// Another replica with the same key opens it too.
	other, _ := New(key)
	if err := other.Open("session", sealed, &got); err != nil {
		t.Fatalf("a replica with the same key must open it: %v", err)
	}

	wrongKey, _ := New([]byte(strings.Repeat("x", MinKeyBytes)))
	payload, sig, _ := strings.Cut(sealed, ".")
	forged, _ := New(key)
	otherPayload, _ := forged.Seal("session", claims{"mallory", 7})
	op, _, _ := strings.Cut(otherPayload, ".")
	for name, tc := range map[string]struct {
		s       *Sealer
		purpose string
		sealed  string
	}{
		"wrong key":                {wrongKey, "session", sealed},
		"wrong purpose":            {s, "requestState", sealed},
		"payload swapped":          {s, "session", op + "." + sig},
		"signature cut":            {s, "session", payload + "." + sig[:10]},
		"no signature":             {s, "session", payload},
		"empty":                    {s, "session", ""},
		"garbage":                  {s, "session", "!!!.???"},
		"signature of another key": {s, "session", payload + "." + strings.Repeat("A", len(sig))},
	} {
		if err := tc.s.Open(tc.purpose, tc.sealed, &got); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Open = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("a short key must be refused")
	}
}

// respellings are the strings Go's lenient decoder reads as the same bytes
// as sealed: the last character of either part with other spare bits, an
// added line break, padding.
func respellings(sealed string) []string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var out []string
	p, sig, _ := strings.Cut(sealed, ".")
	lastChar := func(s string) []string {
		var vs []string
		for _, c := range alphabet {
			if v := s[:len(s)-1] + string(c); v != s {
				if b, err := enc.DecodeString(v); err == nil {
					if orig, _ := enc.DecodeString(s); string(b) == string(orig) {
						vs = append(vs, v)
					}
				}
			}
		}
		return vs
	}
	for _, v := range lastChar(sig) {
		out = append(out, p+"."+v)
	}
	for _, v := range lastChar(p) {
		out = append(out, v+"."+sig)
	}
	out = append(out, p+"."+sig[:5]+"\n"+sig[5:], p[:3]+"\r\n"+p[3:]+"."+sig, p+"."+sig+"=")
	return out
}

// TestOneSpelling: the attack of a used requestState with its last base64
// character changed. Only the spelling Seal wrote opens.
func TestOneSpelling(t *testing.T) {
	s, _ := New([]byte(strings.Repeat("k", MinKeyBytes)))
	sealed, _ := s.Seal("state", claims{"alice", 1})
	others := respellings(sealed)
	if len(others) < 4 {
		t.Fatalf("expected several lenient spellings of %q, found %q", sealed, others)
	}
	var got claims
	for _, v := range others {
		if err := s.Open("state", v, &got); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid: a sealed value has one spelling", v, err)
		}
	}
	if err := s.Open("state", sealed, &got); err != nil {
		t.Fatal(err)
	}
}

func TestSpent(t *testing.T) {
	s, _ := New([]byte(strings.Repeat("k", MinKeyBytes)))
	a, _ := s.Seal("state", claims{"alice", 1})
	b, _ := s.Seal("state", claims{"alice", 2})
	now := time.Unix(1000, 0)
	var sp Spent
	if !sp.Use(a, now.Add(time.Minute), now) || !sp.Use(b, now.Add(time.Minute), now) {
		t.Fatal("first uses must pass")
	}
	if sp.Use(a, now.Add(time.Minute), now) {
		t.Fatal("a second use must be refused")
	}
	// Keyed on the MAC: a lenient spelling of a used value is the same value.
	for _, v := range respellings(a) {
		if sp.Use(v, now.Add(time.Minute), now) {
			t.Errorf("Use(%q) passed: another spelling of a used value", v)
		}
	}
	if sp.Use("not sealed", now.Add(time.Minute), now) || sp.Use("x.!!", now.Add(time.Minute), now) {
		t.Fatal("a string that is not a sealed value must not be usable")
	}
	// Expired entries are swept; used values stay refused until then.
	later := now.Add(2 * time.Minute)
	for i := range pruneEvery {
		v, _ := s.Seal("state", claims{"bob", 100 + i})
		sp.Use(v, later.Add(time.Minute), later)
	}
	if n := sp.Len(); n != pruneEvery {
		t.Fatalf("%d values remembered after the sweep, want %d (the two expired ones dropped)", n, pruneEvery)
	}
}

// A requestState carried by the agent must not show what it holds (a
// server's own state, the call's arguments) to anyone who decodes its
// base64. The payload is encrypted: nothing of it can be read, and a
// payload sealed with another key, or for another purpose, does not open.
func TestPayloadIsEncrypted(t *testing.T) {
	s, _ := New([]byte(strings.Repeat("k", MinKeyBytes)))
	secret := "db-password-hunter2-in-args"
	sealed, err := s.Seal("state", claims{secret, 7})
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := strings.Cut(sealed, ".")
	raw, err := enc.DecodeString(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secret) || strings.Contains(string(raw), "hunter2") || strings.Contains(sealed, enc.EncodeToString([]byte(secret))[:12]) {
		t.Fatalf("the sealed value shows its payload: %q", raw)
	}
	again, _ := s.Seal("state", claims{secret, 7})
	if again == sealed {
		t.Fatal("two seals of one value are alike: the nonce is not fresh")
	}
	var got claims
	if err := s.Open("state", sealed, &got); err != nil || got.Sub != secret {
		t.Fatalf("Open = %+v, %v", got, err)
	}
	// The MAC holds, but the ciphertext is another key's: refused.
	other, _ := New([]byte(strings.Repeat("o", MinKeyBytes)))
	foreign, _ := other.Seal("state", claims{"x", 1})
	fp, _, _ := strings.Cut(foreign, ".")
	forged := fp + "." + enc.EncodeToString(s.mac("state", fp))
	if err := s.Open("state", forged, &got); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a payload encrypted with another key opened: %v", err)
	}
}
