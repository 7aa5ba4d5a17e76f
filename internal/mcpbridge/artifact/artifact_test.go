package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPutGetOwnership(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("a large result")
	sha, err := s.Put("system:serviceaccount:team-a:agent", data)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if sha != hex.EncodeToString(sum[:]) {
		t.Fatalf("sha %s is not the sha256 of the data", sha)
	}
	got, err := s.Get("system:serviceaccount:team-a:agent", sha)
	if err != nil || string(got) != string(data) {
		t.Fatalf("Get by the owner = %q, %v", got, err)
	}
	if _, err := s.Get("system:serviceaccount:team-b:agent", sha); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get by another subject: %v, want ErrNotFound", err)
	}
	// The other subject storing the same bytes becomes an owner too.
	if sha2, err := s.Put("system:serviceaccount:team-b:agent", data); err != nil || sha2 != sha {
		t.Fatalf("second Put = %s, %v", sha2, err)
	}
	if _, err := s.Get("system:serviceaccount:team-b:agent", sha); err != nil {
		t.Fatalf("Get after the second Put: %v", err)
	}
	for _, bad := range []string{"", "../../etc/passwd", sha[:63], sha + "0", "ZZ" + sha[2:]} {
		if _, err := s.Get("system:serviceaccount:team-a:agent", bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", bad, err)
		}
	}
	missing := hex.EncodeToString(make([]byte, 32))
	if _, err := s.Get("x", missing); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing artifact: %v", err)
	}
}

func TestConcurrentPutsLeaveOneCompleteFile(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := s.Put(string(rune('a'+i)), data); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	entries, err := os.ReadDir(filepath.Join(dir, sha[:2], sha))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 9 { // data and 8 owners, no temporary files left
		t.Fatalf("entries %v", entries)
	}
	for i := range 8 {
		if got, err := s.Get(string(rune('a'+i)), sha); err != nil || len(got) != len(data) {
			t.Fatalf("Get: %d bytes, %v", len(got), err)
		}
	}
}

func TestURI(t *testing.T) {
	sha := hex.EncodeToString(make([]byte, 32))
	if got, ok := ParseURI(URI(sha)); !ok || got != sha {
		t.Fatalf("ParseURI(URI) = %q, %v", got, ok)
	}
	for _, bad := range []string{"artifact://x", "file://" + sha, sha} {
		if _, ok := ParseURI(bad); ok {
			t.Errorf("ParseURI(%q) accepted", bad)
		}
	}
}

// TestRetentionAndQuota: artifacts expire MaxAge after they were last
// stored, and the store refuses what would take it over MaxBytes, until a
// sweep finds room.
func TestRetentionAndQuota(t *testing.T) {
	offset := time.Duration(0)
	clock := func() time.Time { return time.Now().Add(offset) }
	s, err := New(t.TempDir(), Limits{MaxAge: time.Hour, MaxBytes: 100, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	a := bytes.Repeat([]byte("a"), 60)
	b := bytes.Repeat([]byte("b"), 50)
	shaA, err := s.Put("alice", a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("bob", b); !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "60 of its 100 bytes") {
		t.Fatalf("over the quota: %v, want ErrFull saying how full", err)
	}
	if _, err := s.Put("bob", a); err != nil {
		t.Fatalf("bytes stored already take no more room: %v", err)
	}
	if st := s.Stats(); st.Bytes != 60 || st.Count != 1 || st.Refused != 1 {
		t.Fatalf("stats %+v, want 60 bytes in 1 artifact, 1 refused", st)
	}

	offset = 59 * time.Minute
	if _, err := s.Get("alice", shaA); err != nil {
		t.Fatalf("within MaxAge: %v", err)
	}
	offset = 61 * time.Minute
	if _, err := s.Get("alice", shaA); !errors.Is(err, ErrNotFound) {
		t.Fatalf("past MaxAge: %v, want ErrNotFound", err)
	}
	// Room is found by sweeping the expired artifact away.
	shaB, err := s.Put("bob", b)
	if err != nil {
		t.Fatalf("after the old artifact expired: %v", err)
	}
	if st := s.Stats(); st.Bytes != 50 || st.Count != 1 {
		t.Fatalf("stats %+v after the sweep, want 50 bytes in 1 artifact", st)
	}
	if _, err := os.Stat(s.path(shaA)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the expired artifact is still on disk: %v", err)
	}
	if got, err := s.Get("bob", shaB); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("Get = %q, %v", got, err)
	}

	// A store opened on the same directory (another replica) counts what
	// is there.
	other, err := New(s.dir, Limits{MaxAge: time.Hour, MaxBytes: 100, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if st := other.Stats(); st.Bytes != 50 || st.Count != 1 {
		t.Fatalf("another replica's stats %+v, want 50 bytes in 1 artifact", st)
	}
}

// TestSweepKeepsReservations: bytes reserved by a Put still writing are
// not on disk, so a sweep's count misses them; they must still count, or
// the next Put overshoots the quota. The reservation is made directly, as
// a Put in flight holds it (a real Put cannot be stopped mid-write here).
func TestSweepKeepsReservations(t *testing.T) {
	s, err := New(t.TempDir(), Limits{MaxAge: time.Hour, MaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.reserve(60); err != nil {
		t.Fatal(err)
	}
	if err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("bob", bytes.Repeat([]byte("b"), 50)); !errors.Is(err, ErrFull) {
		t.Fatalf("60 bytes reserved and 50 more: %v, want ErrFull", err)
	}
	s.settle(60, false)
	if _, err := s.Put("bob", bytes.Repeat([]byte("b"), 50)); err != nil {
		t.Fatalf("after the reservation was given back: %v", err)
	}
	if st := s.Stats(); st.Bytes != 50 || st.Count != 1 {
		t.Fatalf("stats %+v, want 50 bytes in 1 artifact", st)
	}
}

// TestSweepSparesARefreshedArtifact: a sweep finds an artifact expired,
// and before it removes it the artifact is stored again (another agent's
// call, or another replica): the refreshed artifact stays readable.
func TestSweepSparesARefreshedArtifact(t *testing.T) {
	offset := time.Duration(0)
	clock := func() time.Time { return time.Now().Add(offset) }
	s, err := New(t.TempDir(), Limits{MaxAge: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("result")
	sha, err := s.Put("alice", data)
	if err != nil {
		t.Fatal(err)
	}
	offset = 2 * time.Hour
	s.beforeRemove = func(string) {
		s.beforeRemove = nil
		if _, err := s.Put("bob", data); err != nil {
			t.Errorf("the re-Put during the sweep: %v", err)
		}
	}
	if err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get("bob", sha); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the artifact stored again during the sweep: %q, %v", got, err)
	}
	if st := s.Stats(); st.Bytes != int64(len(data)) || st.Count != 1 {
		t.Fatalf("stats %+v, want the refreshed artifact counted once", st)
	}
}
