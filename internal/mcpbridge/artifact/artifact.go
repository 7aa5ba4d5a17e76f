// Package artifact keeps the results too large to hand to an agent: a
// directory (on a volume the bridge replicas may share) of files keyed by the
// sha256 of their bytes, each readable only by the subjects that produced it.
// The agent gets artifact://<sha256> and reads it back with resources/read.
//
// Layout, for an operator who wants to look:
//
//	<dir>/<sha[0:2]>/<sha>/data               the bytes
//	<dir>/<sha[0:2]>/<sha>/owner-<hash>       one per subject; holds the subject's name
//
// Every file is written to a temporary name and renamed, so readers never
// see a partial file; owners are separate files, so two replicas storing the
// same bytes for different subjects need no lock between them.
package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Scheme is the URI scheme of artifacts.
const Scheme = "artifact://"

// ErrNotFound is returned for an artifact that does not exist and for one
// the subject did not produce: which of the two is not revealed.
var ErrNotFound = errors.New("no such artifact")

// URI is the artifact URI of a sha256 (hex).
func URI(sha string) string { return Scheme + sha }

// ParseURI returns the sha256 of an artifact URI.
func ParseURI(uri string) (string, bool) {
	sha, ok := strings.CutPrefix(uri, Scheme)
	return sha, ok && validSHA(sha)
}

// Store is a directory of artifacts.
type Store struct{ dir string }

// Open uses dir as a store, creating it (mode 0700) when missing.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("while creating the artifact directory: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Put stores data for subject and returns its sha256 (hex). Storing bytes
// that are there already only adds subject as an owner.
func (s *Store) Put(subject string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	dir := s.path(sha)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("while storing artifact %s: %w", sha, err)
	}
	dataPath := filepath.Join(dir, "data")
	if _, err := os.Stat(dataPath); errors.Is(err, fs.ErrNotExist) {
		if err := writeAtomic(dataPath, data, true); err != nil {
			return "", fmt.Errorf("while storing artifact %s: %w", sha, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("while storing artifact %s: %w", sha, err)
	}
	if err := writeAtomic(s.ownerPath(sha, subject), []byte(subject+"\n"), false); err != nil {
		return "", fmt.Errorf("while recording the owner of artifact %s: %w", sha, err)
	}
	return sha, nil
}

// Get returns the bytes of artifact sha to a subject that produced it;
// ErrNotFound otherwise.
func (s *Store) Get(subject, sha string) ([]byte, error) {
	if !validSHA(sha) {
		return nil, ErrNotFound
	}
	if _, err := os.Stat(s.ownerPath(sha, subject)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("while reading artifact %s: %w", sha, err)
	}
	data, err := os.ReadFile(filepath.Join(s.path(sha), "data"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("while reading artifact %s: %w", sha, err)
	}
	return data, nil
}

func (s *Store) path(sha string) string { return filepath.Join(s.dir, sha[:2], sha) }

// ownerPath names the owner file by a hash of the subject: subjects hold
// characters ("system:serviceaccount:ns:name", "/") a file name can't.
func (s *Store) ownerPath(sha, subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return filepath.Join(s.path(sha), "owner-"+hex.EncodeToString(sum[:16]))
}

func validSHA(sha string) bool {
	if len(sha) != 64 {
		return false
	}
	for i := 0; i < len(sha); i++ {
		if c := sha[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// writeAtomic writes data to a temporary file beside path and renames it.
// sync also flushes the data to disk first, so that a crash never leaves an
// empty artifact under its sha256.
func writeAtomic(path string, data []byte, sync bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
