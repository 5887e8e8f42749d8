package gateway_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kilnctl/kiln/engine/platform"
)

// The release's image, as goreleaser's kos section builds it: the kiln
// binary at /ko-app/kiln, that binary as the entrypoint, the nonroot user.
const (
	imageBinary = "/ko-app/kiln"
	imageUser   = "65532:65532"
)

// buildImage builds kiln's gateway image from bin the way ko lays it out
// (on an empty base: no shell, nothing but the binary) and writes it as
// an OCI layout in dir, tagged ref.
func buildImage(t *testing.T, bin, dir, ref string) {
	t.Helper()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// Owned by root and not writable by the user the image runs as.
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "ko-app/", Mode: 0o755}))
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(imageBinary, "/"), Mode: 0o555, Size: int64(len(data))}))
	_, err = tw.Write(data)
	must(t, err)
	must(t, tw.Close())
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	must(t, err)
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	must(t, err)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	must(t, err)
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = runtime.GOOS, runtime.GOARCH
	cf.Config.Entrypoint = []string{imageBinary}
	cf.Config.User = imageUser
	cf.Config.WorkingDir = "/"
	img, err = mutate.ConfigFile(img, cf)
	must(t, err)
	p, err := layout.Write(dir, empty.Index)
	must(t, err)
	must(t, p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestGatewayImage builds the gateway image as an OCI layout from the
// built kiln binary, reads it back, and checks what the platform relies
// on: a non-root user, the kiln binary as entrypoint, no shell; then runs
// the binary taken from the image with the entrypoint and the args the
// platform's Deployment gives it, and sees a ready gateway.
func TestGatewayImage(t *testing.T) {
	const version = testVersion
	bin, err := buildKiln()
	must(t, err)
	ref := platform.GatewayImage("v" + version)
	if want := "ghcr.io/kilnctl/kiln:" + version; ref != want {
		t.Fatalf("GatewayImage = %s, want %s (goreleaser tags the version without v)", ref, want)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	buildImage(t, bin, dir, ref)

	// Read it back as any OCI tool would.
	p, err := layout.FromPath(dir)
	must(t, err)
	idx, err := p.ImageIndex()
	must(t, err)
	im, err := idx.IndexManifest()
	must(t, err)
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Fatalf("index = %+v, want one image named %s", im.Manifests, ref)
	}
	if mt := im.Manifests[0].MediaType; mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	must(t, err)
	cf, err := img.ConfigFile()
	must(t, err)
	checkImageConfig(t, cf.Config)

	// The filesystem: the binary and nothing to run a shell with.
	files := map[string]*tar.Header{}
	var binData []byte
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		name := "/" + strings.TrimPrefix(path.Clean(h.Name), "/")
		files[name] = h
		if name == imageBinary {
			binData, err = io.ReadAll(tr)
			must(t, err)
		}
	}
	for name := range files {
		if base := path.Base(name); base == "sh" || base == "bash" || base == "busybox" || strings.HasPrefix(name, "/bin") {
			t.Errorf("the image contains %s", name)
		}
	}
	h := files[imageBinary]
	if h == nil || h.Mode&0o111 == 0 || h.Mode&0o022 != 0 || h.Uid != 0 {
		t.Fatalf("entrypoint %s: %+v; want an executable owned by root, not writable by others", imageBinary, h)
	}

	// Run the image's binary as the Deployment runs it: entrypoint, then
	// the platform's args. Later flags override the listen addresses (the
	// container's ports may be taken here) and the auth dir (the mount).
	extracted := filepath.Join(t.TempDir(), "kiln")
	must(t, os.WriteFile(extracted, binData, 0o755))
	out, err := exec.Command(extracted, "version", "-o", "json").Output()
	must(t, err)
	var v struct{ Version string }
	if err := json.Unmarshal(out, &v); err != nil || v.Version != version {
		t.Fatalf("kiln version from the image = %q (%v), want %s", out, err, version)
	}
	args := platform.GatewayArgs("dev1", "dev1.kiln.test", false)
	if args[0] != "gateway" {
		t.Fatalf("GatewayArgs = %v: with the entrypoint they must run `kiln gateway`", args)
	}
	auth := newAuthDir(t, newKey(t))
	args = append(args, "--auth-dir="+auth.path, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0")
	gw := startProc(t, extracted, append(cf.Config.Entrypoint[1:], args...)...)
	metricsAddr := <-gw.addrs
	eventually(t, "the gateway from the image is ready", func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	// /readyz is on the metrics port only: tenants do not reach it.
	resp, err := http.Get(gw.url("/readyz"))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/readyz on the tenant port: %d, want 404", resp.StatusCode)
	}
}

func checkImageConfig(t *testing.T, c v1.Config) {
	t.Helper()
	uid, _, _ := strings.Cut(c.User, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("user %q: want a numeric non-root uid (runAsNonRoot can only check numbers)", c.User)
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != imageBinary {
		t.Errorf("entrypoint %q, want [%s]", c.Entrypoint, imageBinary)
	}
	if len(c.Cmd) != 0 {
		t.Errorf("cmd %q: the Deployment's args are the whole command line after the entrypoint", c.Cmd)
	}
}
