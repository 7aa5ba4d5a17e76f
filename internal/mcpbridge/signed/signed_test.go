package signed

import (
	"errors"
	"strings"
	"testing"
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
