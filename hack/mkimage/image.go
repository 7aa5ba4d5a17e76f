package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one file copied into the image: Src on this machine, Dst the
// absolute path in the image.
type File struct {
	Src, Dst string
}

// Spec says what image to build.
type Spec struct {
	Tag        string
	User       string // UID[:GID]
	Entrypoint string // default: Files[0].Dst
	Files      []File
}

// epoch is the fixed time of every entry and of the image config, so builds
// are reproducible.
var epoch = time.Unix(0, 0).UTC()

// Build assembles the image described by spec.
func Build(spec Spec) (v1.Image, error) {
	if len(spec.Files) == 0 {
		return nil, errors.New("no files given: nothing to put in the image")
	}
	uid, gid, err := parseUser(spec.User)
	if err != nil {
		return nil, err
	}
	entry := spec.Entrypoint
	if entry == "" {
		entry = spec.Files[0].Dst
	}
	layerBytes, err := layerTar(spec.Files, uid, gid)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("while making the layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("while adding the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("while reading the image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: []string{entry},
		User:       fmt.Sprintf("%d:%d", uid, gid),
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin:/"},
		WorkingDir: "/",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("while setting the image config: %w", err)
	}
	return img, nil
}

// Write builds the image and writes it as a docker-archive tarball to out
// (atomically: a half-written archive is never left at out). It returns the
// image's digest.
func Write(spec Spec, out string) (string, error) {
	tag, err := name.NewTag(spec.Tag, name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("while parsing the tag %q: %w", spec.Tag, err)
	}
	img, err := Build(spec)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("while creating the output directory: %w", err)
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("while writing %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("while writing %s: %w", out, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("while computing the image digest: %w", err)
	}
	return d.String(), nil
}

func parseUser(s string) (uid, gid int, err error) {
	u, g, hasGID := strings.Cut(s, ":")
	if uid, err = strconv.Atoi(u); err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("user %q: UID must be a non-negative number", s)
	}
	gid = uid
	if hasGID {
		if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("user %q: GID must be a non-negative number", s)
		}
	}
	return uid, gid, nil
}

// layerTar writes the layer: parent directories, the files, /etc/passwd and
// /etc/group (so tools inside the image can name the user) and /tmp.
func layerTar(files []File, uid, gid int) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	addDir := func(dir string, mode int64) error {
		if dir == "." || dir == "/" || dirs[dir] {
			return nil
		}
		dirs[dir] = true
		return tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: epoch})
	}
	addFile := func(p string, mode int64, data []byte) error {
		for _, d := range parents(p) {
			if err := addDir(d, 0o755); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}

	if err := addDir("tmp", 0o1777); err != nil {
		return nil, fmt.Errorf("while writing the layer: %w", err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", gid)
	if uid == 0 {
		passwd, group = "root:x:0:0:root:/root:/sbin/nologin\n", "root:x:0:\n"
	}
	if err := addFile("etc/passwd", 0o644, []byte(passwd)); err != nil {
		return nil, fmt.Errorf("while writing the layer: %w", err)
	}
	if err := addFile("etc/group", 0o644, []byte(group)); err != nil {
		return nil, fmt.Errorf("while writing the layer: %w", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if !path.IsAbs(f.Dst) {
			return nil, fmt.Errorf("destination %q must be an absolute path", f.Dst)
		}
		dst := strings.TrimPrefix(path.Clean(f.Dst), "/")
		if dst == "etc/passwd" || dst == "etc/group" || dst == "tmp" || dst == "" {
			return nil, fmt.Errorf("destination %q is reserved", f.Dst)
		}
		if seen[dst] || dirs[dst] {
			return nil, fmt.Errorf("destination %q is given twice", f.Dst)
		}
		seen[dst] = true
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, fmt.Errorf("while reading %s: %w", f.Src, err)
		}
		if err := addFile(dst, 0o755, data); err != nil {
			return nil, fmt.Errorf("while adding %s: %w", f.Src, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("while writing the layer: %w", err)
	}
	return buf.Bytes(), nil
}

// parents lists the directories above p, outermost first ("a/b/c" → a, a/b).
func parents(p string) []string {
	var out []string
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}
