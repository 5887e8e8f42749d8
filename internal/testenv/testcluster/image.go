package testcluster

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Images for the real node are built here, never pulled: there is no
// registry. A Go program becomes a one-layer image holding its static
// binary; the image is written as a docker-archive tarball and imported
// into the node's containerd (namespace k8s.io, where the CRI looks).

// BinaryImage makes a one-layer image of a static binary at path inside the
// image, run as entrypoint (with args) by user ("" for root).
func BinaryImage(bin, path, user string, args ...string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := strings.TrimPrefix(filepath.Dir(path), "/")
	if dir != "" && dir != "." {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(path, "/"), Mode: 0o555, Size: int64(len(data))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.DockerLayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = runtime.GOOS, runtime.GOARCH
	cf.Config.Entrypoint = []string{path}
	cf.Config.Cmd = args
	cf.Config.User = user
	cf.Config.WorkingDir = "/"
	return mutate.ConfigFile(img, cf)
}

// BuildGoBinary builds the main package pkg (an import path in the kiln
// module, or a directory) as a static linux binary into dir.
func BuildGoBinary(ctx context.Context, pkg, dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", pkg, err, b)
	}
	return out, nil
}

// ImportGoImage builds the Go main package pkg and imports it into the real
// node as image ref (entrypoint /<name of pkg>, run as root).
func (c *Cluster) ImportGoImage(ctx context.Context, ref, pkg string, args ...string) error {
	dir := c.path("realnode", "images")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	bin, err := BuildGoBinary(ctx, pkg, dir)
	if err != nil {
		return err
	}
	img, err := BinaryImage(bin, "/"+filepath.Base(pkg), "", args...)
	if err != nil {
		return err
	}
	return c.ImportImage(ctx, ref, img)
}

// ImportImage imports img into the real node's containerd as ref. Name it
// as containerd normalises it (docker.io/library/x:tag for a short x:tag,
// which is what a pod's image field resolves to).
func (c *Cluster) ImportImage(ctx context.Context, ref string, img v1.Image) error {
	if c.real == nil {
		return errors.New("ImportImage: the cluster has no real node (Options.RealNode)")
	}
	return importImage(ctx, c.path("realnode", "images"), c.real.st.socket(), ref, img)
}

// ImportImageTarball imports a docker-archive or OCI-archive tarball into
// the real node's containerd.
func (c *Cluster) ImportImageTarball(ctx context.Context, path string) error {
	if c.real == nil {
		return errors.New("ImportImageTarball: the cluster has no real node (Options.RealNode)")
	}
	return importTarball(ctx, c.real.st.socket(), path)
}

// ImportIntoRealNode imports img as ref into the real node running on this
// machine, from another process than the one that started it (the demo's
// `hack/cluster images`); scratch is a directory for the tarball.
func ImportIntoRealNode(ctx context.Context, scratch, ref string, img v1.Image) error {
	sock := realNodeRecord{}.socket()
	if _, err := os.Stat(sock); err != nil {
		return fmt.Errorf("no real node runs on this machine (%w)", err)
	}
	return importImage(ctx, scratch, sock, ref, img)
}

func importImage(ctx context.Context, dir, socket, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := tarball.Write(tag, img, f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return importTarball(ctx, socket, f.Name())
}

func importTarball(ctx context.Context, socket, path string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", socket, "-n", "k8s.io", "images", "import", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", path, err, out)
	}
	return nil
}

// ImportImageLayout imports every image of an OCI image layout directory
// (as kiln's gateway image test writes) into the real node's containerd,
// each under its org.opencontainers.image.ref.name annotation.
func (c *Cluster) ImportImageLayout(ctx context.Context, dir string) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		ref := d.Annotations["org.opencontainers.image.ref.name"]
		if ref == "" {
			return fmt.Errorf("image %s in %s has no org.opencontainers.image.ref.name", d.Digest, dir)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		if err := c.ImportImage(ctx, ref, img); err != nil {
			return err
		}
	}
	return nil
}
