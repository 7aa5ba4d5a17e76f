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
//
// Artifacts are kept for Limits.MaxAge after they were last stored, and the
// store holds at most Limits.MaxBytes: past it, new results are refused (and
// their calls fail, saying why) rather than older ones evicted, so no agent
// can make another's artifacts disappear. Sweep deletes expired artifacts
// and recounts what the directory holds, other replicas' artifacts included
// (the quota is for the volume, which replicas may share); between sweeps a
// replica counts what it stores itself. Bytes reserved by Puts still
// writing are kept apart from that count, so a sweep never drops them; and
// a sweep renames an expired artifact away before deleting it, putting it
// back when a Put refreshed it meanwhile.
package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/every"
)

// Scheme is the URI scheme of artifacts.
const Scheme = "artifact://"

// ErrNotFound is returned for an artifact that does not exist, one that
// expired, and one the subject did not produce: which of these is not
// revealed.
var ErrNotFound = errors.New("no such artifact")

// ErrFull is returned by Put when storing would take the store over
// Limits.MaxBytes.
var ErrFull = errors.New("the artifact store is full")

// Defaults of Limits.
const (
	DefaultMaxAge   = 24 * time.Hour
	DefaultMaxBytes = 900 << 20 // under the chart's 1Gi emptyDir, which evicts the pod when exceeded
)

// Limits bound what a store keeps.
type Limits struct {
	// MaxAge is how long an artifact is kept after it was last stored
	// (DefaultMaxAge when zero; negative: forever).
	MaxAge time.Duration
	// MaxBytes bounds the bytes of all artifacts (DefaultMaxBytes when
	// zero; negative: no bound).
	MaxBytes int64
	// Now reads the clock (time.Now when nil).
	Now func() time.Time
}

// Stats are what a store holds, as of the last sweep and this replica's
// stores since.
type Stats struct {
	Bytes, Count int64
	// Refused counts the results Put refused because the store was full.
	Refused int64
}

// URI is the artifact URI of a sha256 (hex).
func URI(sha string) string { return Scheme + sha }

// ParseURI returns the sha256 of an artifact URI.
func ParseURI(uri string) (string, bool) {
	sha, ok := strings.CutPrefix(uri, Scheme)
	return sha, ok && validSHA(sha)
}

// Store is a directory of artifacts. It is safe for concurrent use.
type Store struct {
	dir    string
	limits Limits

	mu    sync.Mutex
	stats Stats
	// pending are the bytes reserved by Puts still writing: not on disk
	// yet, so a sweep's count cannot hold them.
	pending int64
	// sweeping and landed: bytes Puts finished writing while a sweep ran,
	// which its count may have missed; added to it (counted twice at
	// worst, until the next sweep: the direction that refuses early).
	sweeping int
	landed   int64
	// beforeRemove runs between a sweep's decision to remove an expired
	// artifact and the removal (tests race a re-Put there).
	beforeRemove func(sha string)
}

// Open uses dir as a store with the default limits.
func Open(dir string) (*Store, error) { return New(dir, Limits{}) }

// New uses dir as a store, creating it (mode 0700) when missing, and
// sweeps it once.
func New(dir string, l Limits) (*Store, error) {
	if l.MaxAge == 0 {
		l.MaxAge = DefaultMaxAge
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("while creating the artifact directory: %w", err)
	}
	s := &Store{dir: dir, limits: l}
	if err := s.Sweep(); err != nil {
		return nil, err
	}
	return s, nil
}

// Stats returns what the store holds.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Sweep deletes the artifacts past MaxAge and recounts the others.
func (s *Store) Sweep() error {
	var st Stats
	now := s.limits.Now()
	s.mu.Lock()
	if s.sweeping++; s.sweeping == 1 {
		s.landed = 0
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.sweeping--
		s.mu.Unlock()
	}()
	dataFiles, err := filepath.Glob(filepath.Join(s.dir, "??", "*", "data"))
	if err != nil {
		return fmt.Errorf("while sweeping the artifact directory: %w", err)
	}
	for _, data := range dataFiles {
		fi, err := os.Stat(data)
		if err != nil {
			continue // removed meanwhile, by another replica's sweep
		}
		if s.expired(fi, now) {
			removed, err := s.removeExpired(filepath.Dir(data), now)
			if err != nil {
				return fmt.Errorf("while deleting an expired artifact: %w", err)
			}
			if removed {
				continue
			}
			if fi, err = os.Stat(data); err != nil {
				continue
			}
		}
		st.Bytes += fi.Size()
		st.Count++
	}
	s.mu.Lock()
	st.Refused = s.stats.Refused
	st.Bytes += s.landed
	s.stats = st
	s.mu.Unlock()
	return nil
}

// removeExpired deletes the artifact directory dir unless a Put refreshed
// it since it was found expired: the directory is first renamed away (an
// atomic step no Put can half-see), its data checked again, and put back
// when it was refreshed in between. A Put that touches the directory while
// it is away fails to find it and stores the artifact again (Put retries).
func (s *Store) removeExpired(dir string, now time.Time) (bool, error) {
	if s.beforeRemove != nil {
		s.beforeRemove(filepath.Base(dir))
	}
	away := fmt.Sprintf("%s.removing-%d", dir, now.UnixNano())
	if err := os.Rename(dir, away); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return true, nil // another replica's sweep took it
		}
		return false, err
	}
	if fi, err := os.Stat(filepath.Join(away, "data")); err == nil && !s.expired(fi, now) {
		if os.Rename(away, dir) == nil {
			return false, nil
		}
		// A Put stored it again meanwhile: that copy stays.
	}
	return true, os.RemoveAll(away)
}

// Run sweeps every interval until ctx ends; errors go to onError.
func (s *Store) Run(ctx context.Context, interval time.Duration, onError func(error)) {
	every.Run(ctx, interval, func() {
		if err := s.Sweep(); err != nil && onError != nil {
			onError(err)
		}
	})
}

func (s *Store) expired(fi fs.FileInfo, now time.Time) bool {
	return s.limits.MaxAge > 0 && now.Sub(fi.ModTime()) > s.limits.MaxAge
}

// reserve counts n more bytes if they fit under MaxBytes, sweeping first
// when they seem not to (expired artifacts, or another replica's sweep,
// may have freed room).
func (s *Store) reserve(n int64) error {
	fits := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.limits.MaxBytes > 0 && s.stats.Bytes+s.pending+n > s.limits.MaxBytes {
			return false
		}
		s.pending += n
		return true
	}
	if fits() {
		return nil
	}
	if err := s.Sweep(); err != nil {
		return err
	}
	if fits() {
		return nil
	}
	s.mu.Lock()
	s.stats.Refused++
	used := s.stats.Bytes + s.pending
	s.mu.Unlock()
	return fmt.Errorf("%w: %d of its %d bytes are taken and this result is %d bytes (artifacts are kept %s)", ErrFull, used, s.limits.MaxBytes, n, s.limits.MaxAge)
}

// settle ends a reservation of n bytes; stored says they are on disk now.
func (s *Store) settle(n int64, stored bool) {
	s.mu.Lock()
	s.pending -= n
	if stored {
		s.stats.Bytes += n
		s.stats.Count++
		if s.sweeping > 0 {
			s.landed += n
		}
	}
	s.mu.Unlock()
}

// putAttempts bounds the retries of a Put whose artifact a concurrent sweep
// removed under it.
const putAttempts = 3

// Put stores data for subject and returns its sha256 (hex). Storing bytes
// that are there already only adds subject as an owner.
func (s *Store) Put(subject string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	var err error
	for range putAttempts {
		if err = s.put(subject, sha, data); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	return sha, nil
}

// put is one attempt of Put; an fs.ErrNotExist error means a sweep removed
// the artifact meanwhile, and the attempt is worth repeating.
func (s *Store) put(subject, sha string, data []byte) error {
	dir := s.path(sha)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("while storing artifact %s: %w", sha, err)
	}
	dataPath := filepath.Join(dir, "data")
	if _, err := os.Stat(dataPath); errors.Is(err, fs.ErrNotExist) {
		if err := s.reserve(int64(len(data))); err != nil {
			_ = os.Remove(dir) // only if empty: another subject may own it
			return err
		}
		err := writeAtomic(dataPath, data, true)
		if err != nil {
			s.settle(int64(len(data)), false)
			return fmt.Errorf("while storing artifact %s: %w", sha, err)
		}
		s.settle(int64(len(data)), true)
	} else if err != nil {
		return fmt.Errorf("while storing artifact %s: %w", sha, err)
	}
	// Kept for MaxAge from now, also when it was stored before.
	now := s.limits.Now()
	if err := os.Chtimes(dataPath, now, now); err != nil {
		return fmt.Errorf("while storing artifact %s: %w", sha, err)
	}
	if err := writeAtomic(s.ownerPath(sha, subject), []byte(subject+"\n"), false); err != nil {
		return fmt.Errorf("while recording the owner of artifact %s: %w", sha, err)
	}
	// A sweep that took the directory away after the refresh above puts it
	// back (it is not expired now), or it was another's to take: then the
	// owner file's directory is gone, and the caller tries again.
	if _, err := os.Stat(dataPath); err != nil {
		return fmt.Errorf("while storing artifact %s: %w", sha, err)
	}
	return nil
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
	dataPath := filepath.Join(s.path(sha), "data")
	if fi, err := os.Stat(dataPath); err == nil && s.expired(fi, s.limits.Now()) {
		return nil, ErrNotFound // the next sweep deletes it
	}
	data, err := os.ReadFile(dataPath)
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
// durable also flushes the data to disk first, so that a crash never leaves an
// empty artifact under its sha256.
func writeAtomic(path string, data []byte, durable bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil && durable {
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
