package servingcert_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mtlstest"
	"github.com/mcp-operator/mcp-operator/internal/servingcert"
)

// write puts a pair where a Secret volume would, as the kubelet's atomic
// writer does: the files go into a new timestamped directory, the ..data
// symlink is swapped to it by a rename, tls.crt and tls.key are symlinks
// through ..data, and the previous directory is removed afterwards.
func write(t *testing.T, dir string, cert, key []byte) {
	t.Helper()
	versions++
	ts := fmt.Sprintf("..2026_12_04_16_00_00.%d", versions)
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, ts, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// versions numbers the directories write makes.
var versions int

// served opens a new TLS connection and returns the serial of the
// certificate the server presented (verified against the CA).
func served(t *testing.T, addr string, ca *mtlstest.CA) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

func serial(t *testing.T, p mtlstest.Pair) *big.Int {
	t.Helper()
	c := p.TLS(t)
	return c.Leaf.SerialNumber
}

func TestRotatedCertificateIsServedOnTheNextConnection(t *testing.T) {
	ca := mtlstest.NewCA(t, "serving CA")
	first, second := ca.Server(t, "bridge"), ca.Server(t, "bridge")
	dir := t.TempDir()
	write(t, dir, first.Cert, first.Key)

	var reported []error
	r, err := servingcert.New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), func(err error) { reported = append(reported, err) })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	if got := served(t, addr, ca); got.Cmp(serial(t, first)) != 0 {
		t.Fatalf("serves serial %v, want the first certificate's %v", got, serial(t, first))
	}
	write(t, dir, second.Cert, second.Key)
	if got := served(t, addr, ca); got.Cmp(serial(t, second)) != 0 {
		t.Fatalf("after rotation serves serial %v, want the second certificate's %v", got, serial(t, second))
	}

	// A half-written update (a new certificate beside a key that is not
	// its own) keeps the last good pair and is reported once.
	third := ca.Server(t, "bridge")
	write(t, dir, third.Cert, second.Key)
	for range 2 {
		if got := served(t, addr, ca); got.Cmp(serial(t, second)) != 0 {
			t.Fatalf("with a mismatched pair serves %v, want the last good one %v", got, serial(t, second))
		}
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "tls.crt") {
		t.Errorf("reported %v, want one error naming the files", reported)
	}
	write(t, dir, third.Cert, third.Key)
	if got := served(t, addr, ca); got.Cmp(serial(t, third)) != 0 {
		t.Fatalf("once the pair matches serves %v, want %v", got, serial(t, third))
	}
}

func TestMissingOrBrokenPairRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	_, err := servingcert.New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing files: %v", err)
	}
	write(t, dir, []byte("not a certificate"), []byte("not a key"))
	if _, err := servingcert.New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), nil); err == nil || !strings.Contains(err.Error(), "serving certificate") {
		t.Errorf("broken files: %v", err)
	}
}

// A new pair of the same sizes as the old, written within the filesystem's
// modification time granularity, is still a new version: the ..data swap
// gives it new inodes.
func TestSameSizeSameTimeSwapIsReloaded(t *testing.T) {
	ca := mtlstest.NewCA(t, "serving CA")
	first, second := ca.Server(t, "bridge"), ca.Server(t, "bridge")
	// Pad each file of the pair to the same length (PEM ignores trailing
	// newlines), so only the inode tells the versions apart.
	for _, f := range []struct{ a, b *[]byte }{{&first.Cert, &second.Cert}, {&first.Key, &second.Key}} {
		n := max(len(*f.a), len(*f.b))
		*f.a = append(*f.a, bytes.Repeat([]byte("\n"), n-len(*f.a))...)
		*f.b = append(*f.b, bytes.Repeat([]byte("\n"), n-len(*f.b))...)
	}
	dir := t.TempDir()
	write(t, dir, first.Cert, first.Key)
	r, err := servingcert.New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	stamp := time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)
	pin := func() {
		for _, name := range []string{"tls.crt", "tls.key"} {
			if err := os.Chtimes(filepath.Join(dir, name), stamp, stamp); err != nil {
				t.Fatal(err)
			}
		}
	}
	pin()
	if c, _ := r.GetCertificate(nil); c.Leaf.SerialNumber.Cmp(serial(t, first)) != 0 {
		t.Fatalf("serves %v, want the first certificate's %v", c.Leaf.SerialNumber, serial(t, first))
	}
	write(t, dir, second.Cert, second.Key)
	pin()
	if c, _ := r.GetCertificate(nil); c.Leaf.SerialNumber.Cmp(serial(t, second)) != 0 {
		t.Fatalf("after a same-size, same-time swap serves %v, want the second certificate's %v", c.Leaf.SerialNumber, serial(t, second))
	}
}
