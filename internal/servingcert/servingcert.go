// Package servingcert serves a TLS certificate from a pair of PEM files and
// picks up a new pair when the files change, so a rotated certificate (a
// Secret volume updated by cert-manager or by hand) is served on the next new
// connection without a restart. Connections already open keep the
// certificate they were made with.
package servingcert

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Reloader holds the pair last loaded from CertFile and KeyFile.
type Reloader struct {
	certFile, keyFile string
	// onError hears of a changed pair that does not load (the old one is
	// still served meanwhile).
	onError func(error)

	mu      sync.Mutex
	cert    *tls.Certificate
	version string // the files' sizes, modification times and inodes when loaded
}

// New loads the pair now: a missing or broken pair is an error at start.
// Later failures to load a changed pair go to onError (nil: ignored) and the
// previous certificate stays in use, so a half-written update (a new
// certificate beside the old key) never breaks the listener; the next
// handshake tries again.
func New(certFile, keyFile string, onError func(error)) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, onError: onError}
	if _, err := r.current(); err != nil {
		return nil, err
	}
	return r, nil
}

// fileVersion identifies the files' contents cheaply. A Secret volume swaps
// them by a symlink (os.Stat follows it) to files in a new directory, so a
// new version is a new inode even when its size and modification time (of a
// coarse granularity on some filesystems) match the old one's: the device and
// inode are part of the version, beside the size and time that change when a
// file is rewritten in place.
func (r *Reloader) fileVersion() (string, error) {
	var v string
	for _, name := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return "", err
		}
		v += fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			v += fmt.Sprintf("/%d/%d", st.Dev, st.Ino)
		}
		v += ";"
	}
	return v, nil
}

// current returns the loaded pair, loading it again if the files changed.
func (r *Reloader) current() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, err := r.fileVersion()
	if err == nil && v == r.version {
		return r.cert, nil
	}
	if err == nil {
		var c tls.Certificate
		if c, err = tls.LoadX509KeyPair(r.certFile, r.keyFile); err == nil {
			r.cert, r.version = &c, v
			return r.cert, nil
		}
	}
	err = fmt.Errorf("while loading the serving certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	if r.cert == nil {
		return nil, err
	}
	if r.onError != nil {
		r.onError(err)
	}
	// Remember the broken version, so it is reported once, not on every
	// handshake, until the files change again.
	r.version = v
	return r.cert, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.current()
}

// TLSConfig is a server configuration that serves the reloaded pair, TLS 1.2
// at least.
func (r *Reloader) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12}
}
