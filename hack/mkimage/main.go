// Command mkimage builds a container image from static binaries, without
// Docker or a registry, and writes it as a docker-archive tarball that
// `ctr images import` (containerd) and `docker load` accept.
//
// The image has one layer: the given files, /etc/passwd and /etc/group naming
// the non-root user, and a world-writable /tmp. Timestamps and owners are
// fixed, so the same inputs always give the same image digest.
//
// usage: mkimage -tag REF -out FILE.tar [-user UID[:GID]] [-entrypoint PATH] SRC=DST...
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tag := fs.String("tag", "", "image reference to record in the archive, e.g. localhost/mcp-operator/manager:dev")
	out := fs.String("out", "", "docker-archive tarball to write")
	user := fs.String("user", "65532:65532", "UID[:GID] the image runs as")
	entrypoint := fs.String("entrypoint", "", "path in the image to run (default: the first file's DST)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mkimage -tag REF -out FILE.tar [-user UID[:GID]] [-entrypoint PATH] SRC=DST...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	spec := Spec{Tag: *tag, User: *user, Entrypoint: *entrypoint}
	for _, a := range fs.Args() {
		src, dst, ok := strings.Cut(a, "=")
		if !ok || src == "" || dst == "" {
			fmt.Fprintf(stderr, "mkimage: %q is not SRC=DST\n", a)
			return 2
		}
		spec.Files = append(spec.Files, File{Src: src, Dst: dst})
	}
	if *out == "" {
		fmt.Fprintln(stderr, "mkimage: -out is required")
		return 2
	}
	digest, err := Write(spec, *out)
	if err != nil {
		fmt.Fprintf(stderr, "mkimage: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s %s %s\n", *out, spec.Tag, digest)
	return 0
}
