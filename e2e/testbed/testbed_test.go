package testbed

// Unit tests of the parts of the test bed that need no root and no cluster. The bed itself
// is exercised by the e2e tests (go test -tags e2e ./e2e/).

import (
	"archive/tar"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestFreeIP(t *testing.T) {
	_, n, _ := net.ParseCIDR("10.99.1.0/30")
	used := map[string]bool{}
	if got := freeIP(n, used); got != "10.99.1.1" {
		t.Fatalf("first free IP %q", got)
	}
	used["10.99.1.1"] = true
	if got := freeIP(n, used); got != "10.99.1.2" {
		t.Fatalf("second free IP %q", got)
	}
	used["10.99.1.2"] = true
	if got := freeIP(n, used); got != "" { // .3 is the broadcast address
		t.Fatalf("exhausted range gave %q", got)
	}
}

func TestConfigValidate(t *testing.T) {
	good := ConfigFromEnv()
	good.Name, good.Profile, good.StateDir = "e2e", ProfileKubeadm, "/var/lib/pinniped-e2e/e2e"
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Config){
		func(c *Config) { c.Name = "Bad_Name" },
		func(c *Config) { c.Name = "a-name-that-is-far-too-long" },
		func(c *Config) { c.Profile = "eks" },
		func(c *Config) { c.StateDir = "relative" },
	} {
		c := good
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("config %+v validated", c)
		}
	}
}

func TestFirstServiceIP(t *testing.T) {
	ip, err := firstServiceIP("10.96.0.0/16")
	if err != nil || ip.String() != "10.96.0.1" {
		t.Fatalf("got %v, %v", ip, err)
	}
}

func TestNewServingCert(t *testing.T) {
	caPEM, certPEM, keyPEM, err := NewServingCert("svc.ns.svc")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("bad CA PEM")
	}
	blk, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(x509.VerifyOptions{DNSName: "svc.ns.svc", Roots: pool}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(keyPEM), "PRIVATE KEY") {
		t.Fatal("no key")
	}
}

func TestBuildImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	content := append([]byte("\x7fELF"), make([]byte, 1000)...)
	if err := os.WriteFile(bin, content, 0o755); err != nil { //nolint:gosec // an executable fixture
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	ref := "localhost/pinniped-e2e/prog:v1"
	if err := BuildImage(bin, ref, out); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(ref)
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || strings.Join(cf.Config.Entrypoint, " ") != "/prog" {
		t.Fatalf("config: os %s arch %s entrypoint %v", cf.OS, cf.Architecture, cf.Config.Entrypoint)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "prog" {
			found = h.Size == int64(len(content)) && h.Mode&0o111 != 0
		}
	}
	if !found {
		t.Fatal("binary not in the layer as an executable of the right size")
	}

	// A non-ELF file or a dynamically linked binary is refused with a clear error.
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil { //nolint:gosec // fixture
		t.Fatal(err)
	}
	if err := BuildImage(bin, ref, out); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Fatalf("script accepted: %v", err)
	}
	if err := os.WriteFile(bin, append([]byte("\x7fELF...../lib64/ld-linux-x86-64.so.2"), make([]byte, 100)...), 0o755); err != nil { //nolint:gosec // fixture
		t.Fatal(err)
	}
	if err := BuildImage(bin, ref, out); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("dynamic binary accepted: %v", err)
	}
}
