package testbed

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PauseImage is the pod sandbox image, built from the pause binary of the tools module.
const PauseImage = "localhost/pinniped-e2e/pause:v1"

// BuildImage packs one static binary as /<basename> onto an empty image whose entrypoint is
// that binary, and writes it as a docker-style tarball that "ctr images import" loads. No
// docker, no registry. The binary must be static (CGO_ENABLED=0): the image has nothing else.
func BuildImage(binary, ref, outTar string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	st, err := os.Stat(binary)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", binary)
	}
	if err := checkStatic(binary); err != nil {
		return err
	}
	base := filepath.Base(binary)
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return binaryLayer(binary, base, st.Size())
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	// ctr import picks the image for the host platform: the config must say which it is.
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: []string{"/" + base}, Env: []string{"PATH=/"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(outTar), 0o755); err != nil {
		return err
	}
	// A temporary file of its own: the two profiles' beds run at once and
	// may build the same image into the shared cache at the same moment.
	f, err := os.CreateTemp(filepath.Dir(outTar), filepath.Base(outTar)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_ = f.Close()
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write image tarball: %w", err)
	}
	if err := os.Rename(tmp, outTar); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// binaryLayer streams a tar with the binary (and a /tmp, which many programs want).
func binaryLayer(binary, base string, size int64) (io.ReadCloser, error) {
	f, err := os.Open(binary)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer f.Close()
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777})
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: base, Typeflag: tar.TypeReg, Mode: 0o755, Size: size})
		}
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// checkStatic refuses dynamically linked binaries, which would fail in the empty image with
// a confusing "no such file or directory".
func checkStatic(binary string) error {
	f, err := os.Open(binary)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, buf)
	if !bytes.HasPrefix(buf[:n], []byte("\x7fELF")) {
		return fmt.Errorf("%s is not an ELF binary", binary)
	}
	if bytes.Contains(buf[:n], []byte("/lib64/ld-linux")) || bytes.Contains(buf[:n], []byte("/lib/ld-linux")) {
		return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", binary)
	}
	return nil
}

// CachedImage builds (or reuses) the image tarball for binary+ref in the cache directory,
// keyed by the binary's content, and returns its path.
func CachedImage(binary, ref string) (string, error) {
	f, err := os.Open(binary)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	_ = f.Close()
	if err != nil {
		return "", err
	}
	h.Write([]byte(ref))
	out := filepath.Join(DefaultCacheDir(), "images", hex.EncodeToString(h.Sum(nil))[:24]+".tar")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := BuildImage(binary, ref, out); err != nil {
		return "", fmt.Errorf("build image %s from %s: %w", ref, binary, err)
	}
	return out, nil
}

// ImportImage loads an image tarball into containerd's k8s.io namespace, where the kubelet
// finds it (pods must use imagePullPolicy: Never or IfNotPresent).
func ImportImage(containerdSocket, tarPath string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", "--address", containerdSocket, "-n", "k8s.io", "images", "import", tarPath).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", tarPath, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ImageRef returns a fixed tag for a binary's image: the tag is derived from the binary's
// content, so a rebuilt binary gets a new tag and kubelet never runs a stale one.
func ImageRef(repo, binary string) (string, error) {
	f, err := os.Open(binary)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return repo + ":" + hex.EncodeToString(h.Sum(nil))[:16], nil
}
