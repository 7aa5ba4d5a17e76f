package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWriteReadsBack builds an archive and reads it back the way an importer
// does: the tag, the config (user, entrypoint) and the layer's files.
func TestWriteReadsBack(t *testing.T) {
	dir := t.TempDir()
	bin := writeFile(t, dir, "manager", "#!binary")
	out := filepath.Join(dir, "img", "manager.tar")
	const ref = "localhost/mcp-operator/manager:dev"

	var stdout, stderr bytes.Buffer
	if code := run([]string{"-tag", ref, "-out", out, bin + "=/manager"}, &stdout, &stderr); code != 0 {
		t.Fatalf("run exited %d: %s", code, stderr.String())
	}
	tag, _ := name.NewTag(ref)
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("reading the archive back: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user = %q, want 65532:65532", cf.Config.User)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/manager" {
		t.Errorf("entrypoint = %q, want [/manager]", cf.Config.Entrypoint)
	}
	if cf.OS != "linux" {
		t.Errorf("os = %q", cf.OS)
	}
	d, _ := img.Digest()
	if !strings.Contains(stdout.String(), d.String()) {
		t.Errorf("stdout %q does not name the digest %s", stdout.String(), d)
	}

	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries := map[string]*tar.Header{}
	contents := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
		b, _ := io.ReadAll(tr)
		contents[h.Name] = string(b)
	}
	if h := entries["manager"]; h == nil || h.Mode != 0o755 || contents["manager"] != "#!binary" {
		t.Errorf("manager entry = %+v %q", h, contents["manager"])
	}
	if h := entries["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ entry = %+v, want mode 1777", h)
	}
	if !strings.Contains(contents["etc/passwd"], "nonroot:x:65532:65532:") {
		t.Errorf("etc/passwd = %q", contents["etc/passwd"])
	}
}

// TestReproducible: the same inputs give the same digest, so re-running make
// dev does not change the image and does not restart pods.
func TestReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := writeFile(t, dir, "srv", "payload")
	spec := Spec{Tag: "localhost/x/srv:dev", User: "65532", Files: []File{{Src: bin, Dst: "/usr/local/bin/srv"}}}
	d1, err := Write(spec, filepath.Join(dir, "a.tar"))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Write(spec, filepath.Join(dir, "b.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("digests differ: %s vs %s", d1, d2)
	}
	writeFile(t, dir, "srv", "payload v2")
	d3, err := Write(spec, filepath.Join(dir, "c.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if d3 == d1 {
		t.Error("a changed binary kept the same digest")
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	bin := writeFile(t, dir, "b", "x")
	cases := map[string][]string{
		"no files":       {"-tag", "localhost/a:b", "-out", filepath.Join(dir, "o.tar")},
		"not SRC=DST":    {"-tag", "localhost/a:b", "-out", filepath.Join(dir, "o.tar"), bin},
		"relative dst":   {"-tag", "localhost/a:b", "-out", filepath.Join(dir, "o.tar"), bin + "=b"},
		"reserved dst":   {"-tag", "localhost/a:b", "-out", filepath.Join(dir, "o.tar"), bin + "=/etc/passwd"},
		"twice":          {"-tag", "localhost/a:b", "-out", filepath.Join(dir, "o.tar"), bin + "=/b", bin + "=/b"},
		"missing source": {"-tag", "localhost/a:b", "-out", filepath.Join(dir, "o.tar"), filepath.Join(dir, "nope") + "=/b"},
		"bad tag":        {"-tag", "Not A Tag", "-out", filepath.Join(dir, "o.tar"), bin + "=/b"},
		"bad user":       {"-tag", "localhost/a:b", "-user", "nobody", "-out", filepath.Join(dir, "o.tar"), bin + "=/b"},
		"no out":         {"-tag", "localhost/a:b", bin + "=/b"},
		"unknown flag":   {"-nope"},
		"negative gid":   {"-tag", "localhost/a:b", "-user", "1:-1", "-out", filepath.Join(dir, "o.tar"), bin + "=/b"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code == 0 {
				t.Fatalf("exit 0, want an error; stdout %q", stdout.String())
			}
			if stderr.Len() == 0 {
				t.Error("no error message")
			}
			if _, err := os.Stat(filepath.Join(dir, "o.tar")); err == nil {
				t.Error("an archive was written despite the error")
			}
		})
	}
}
