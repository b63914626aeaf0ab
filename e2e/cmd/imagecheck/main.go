// Command imagecheck proves the release's agent image without publishing it:
// it runs the release (goreleaser, whose ko step builds the multi-arch image
// and pushes it with its SBOMs) against a registry of its own, then checks
// what arrived there as a cluster and a user would see it.
//
//	imagecheck -version V [-image REPO] [-base REF] -- COMMAND [ARGS...]
//
// The release configuration names the real registries (the image's
// repository on ghcr.io, the base image on cgr.dev), and must be checked
// unchanged. So imagecheck serves an in-memory registry
// (go-containerregistry's) with TLS on 127.0.0.1:443, for both names, under
// a certificate from a CA made for this run, which COMMAND trusts through
// SSL_CERT_FILE. It refuses to start unless both names resolve to loopback
// addresses: run it in a network namespace whose /etc/hosts says so
// (.ci/release-snapshot.sh does), so nothing can reach the real ones.
//
// The real base cannot be fetched here, so the registry holds a stand-in
// under the base's name: the same two platforms, with what a static
// distroless base holds (passwd and group with the nonroot user 65532, CA
// certificates, /tmp). That proves the configuration and the build on top of
// a base; which base is pulled at release is the configuration's line alone.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
)

const (
	module   = "github.com/pinniped-kit/pinniped"
	agentPkg = module + "/cmd/pinniped-agent"
	// ko's layout with bare: true.
	entrypoint = "/ko-app/pinniped-agent"
	nonroot    = "65532:65532"
)

// The platforms the release builds the image for (goreleaser.yaml, kos).
var platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "imagecheck:", err)
		os.Exit(1)
	}
}

func run() error {
	// Stopped by a signal, the release is stopped too and the temporary
	// directory still goes.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	version := flag.String("version", "", "the release's version: the image's tag and its version label")
	image := flag.String("image", "ghcr.io/pinniped-kit/pinniped-agent", "the image's repository, as goreleaser.yaml names it")
	baseRef := flag.String("base", "cgr.dev/chainguard/static", "the base image, as goreleaser.yaml names it")
	cosign := flag.String("cosign", "", "path of cosign: its `download sbom`, which README gives users, must find each SBOM")
	flag.Parse()
	if *version == "" || flag.NArg() == 0 {
		return errors.New("usage: imagecheck -version V [-image REPO] [-base REF] -- COMMAND [ARGS...]")
	}
	repo, err := name.NewRepository(*image)
	if err != nil {
		return fmt.Errorf("-image: %w", err)
	}
	base, err := name.ParseReference(*baseRef)
	if err != nil {
		return fmt.Errorf("-base: %w", err)
	}
	hosts := []string{repo.RegistryStr(), base.Context().RegistryStr()}
	for _, h := range hosts {
		if err := resolvesToLoopback(h); err != nil {
			return err
		}
	}

	work, err := os.MkdirTemp("", "imagecheck-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	caFile, srvCert, err := makeCerts(work, hosts)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(caFile) //nolint:gosec // our own temporary file
	if err != nil {
		return err
	}
	pool.AppendCertsFromPEM(caPEM)

	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:443")
	if err != nil {
		return fmt.Errorf("listen on 127.0.0.1:443 (run in a network namespace of your own, as root): %w", err)
	}
	// HTTP/1.1 only: the in-memory registry holds one lock while it reads a
	// chunk's body, so on one HTTP/2 connection a second upload's unread
	// body can use up the connection's flow-control window and stall the
	// first for good (ko pushes both platforms' layers at once).
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{srvCert}},
		Protocols:         &protocols,
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer func() { _ = srv.Shutdown(context.Background()) }()
	opts := []remote.Option{remote.WithTransport(&http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}})}

	baseIdx, err := standInBase()
	if err != nil {
		return fmt.Errorf("build the stand-in base: %w", err)
	}
	if err := remote.WriteIndex(base, baseIdx, opts...); err != nil {
		return fmt.Errorf("push the stand-in base as %s: %w", base, err)
	}

	env, err := releaseEnv(work, caFile)
	if err != nil {
		return err
	}
	// Longer than goreleaser's own timeout (1h), which stops it cleanly.
	ctx, cancel := context.WithTimeout(ctx, 70*time.Minute)
	defer cancel()
	if err := runRelease(ctx, env, flag.Args()); err != nil {
		return err
	}

	for _, f := range flavours {
		if err := check(repo, *version, f, baseIdx, opts); err != nil {
			return err
		}
		if *cosign == "" {
			continue
		}
		if err := userDownloadsSBOMs(ctx, *cosign, env, repo.Tag(*version+f.suffix)); err != nil {
			return err
		}
	}
	return nil
}

// flavour is one image of the release (goreleaser.yaml's kos): the
// ordinary one, and the FIPS one, whose tags end in -fips and whose agent
// is built with Go's FIPS 140-3 module.
type flavour struct {
	suffix string // of the tags
	fips   string // the GOFIPS140 module version the binary is built with; "" for none
}

var flavours = []flavour{{}, {suffix: "-fips", fips: "v1.0.0"}}

// userDownloadsSBOMs runs README's command for the index and for each
// platform, as a user would after a release.
func userDownloadsSBOMs(ctx context.Context, cosign string, env []string, ref name.Tag) error {
	for _, platform := range append([]string{""}, platformNames()...) {
		args := []string{"download", "sbom", ref.String()}
		if platform != "" {
			args = append(args, "--platform", platform)
		}
		cmd := exec.CommandContext(ctx, cosign, args...) //nolint:gosec // the caller's own tool
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("cosign %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		if _, err := readSPDX(bytes.NewReader(out)); err != nil {
			return fmt.Errorf("cosign %s: %w", strings.Join(args, " "), err)
		}
	}
	fmt.Printf("imagecheck: cosign download sbom finds the SBOM of %s and of each platform's image\n", ref)
	return nil
}

func platformNames() []string {
	var names []string
	for _, p := range platforms {
		names = append(names, p.String())
	}
	return names
}

// runRelease runs the release in a process group of its own. Stopped, it
// is asked as goreleaser wants to be (an interrupt), the group killed if it
// is not done 30 s later, so no build or signer it started writes on.
func runRelease(ctx context.Context, env, args []string) error {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...) //nolint:gosec // the caller's own command
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of the group
	}
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	return nil
}

// releaseEnv is the caller's environment for the release, less what would
// send it elsewhere than this registry or stop it: it trusts this run's CA
// alone, has no registry credentials, no proxy, no docker daemon (ko would
// take a base image from one before asking the registry), and no second
// forge token (goreleaser refuses two, even from its token files, before it
// sees the release is off).
func releaseEnv(work, caFile string) ([]string, error) {
	dockerConfig := filepath.Join(work, "docker")
	noCerts := filepath.Join(work, "no-certs")
	for _, d := range []string{dockerConfig, noCerts} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	drop := []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "KO_DOCKER_REPO", "DOCKER_HOST", "DOCKER_CONFIG",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "GITHUB_TOKEN", "GITLAB_TOKEN", "GITEA_TOKEN", "GORELEASER_FORCE_TOKEN"}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(drop, strings.ToUpper(k))
	})
	return append(env, "SSL_CERT_FILE="+caFile, "SSL_CERT_DIR="+noCerts, "DOCKER_CONFIG="+dockerConfig,
		"DOCKER_HOST=unix://"+filepath.Join(work, "no-docker.sock"), "NO_PROXY=*", "GORELEASER_FORCE_TOKEN=github"), nil
}

func resolvesToLoopback(host string) error {
	addrs, err := net.DefaultResolver.LookupHost(context.Background(), host)
	if err != nil {
		return fmt.Errorf("resolve %s: %w (run imagecheck where /etc/hosts points it at 127.0.0.1)", host, err)
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("%s resolves to %s: imagecheck would let the release reach the real registry; run it where /etc/hosts points %s at 127.0.0.1", host, a, host)
		}
	}
	return nil
}

// makeCerts writes this run's CA (for SSL_CERT_FILE) and returns the
// registry's serving certificate for hosts.
func makeCerts(dir string, hosts []string) (string, tls.Certificate, error) {
	ca, err := certauthority.New("imagecheck registry CA", 2*time.Hour, time.Now)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	leaf, err := ca.IssueServingCert(hosts[0], hosts, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	caFile := filepath.Join(dir, "ca.pem")
	return caFile, cert, os.WriteFile(caFile, ca.CertPEM(), 0o600)
}

// standInBase is a two-platform index whose images hold what a static
// distroless base does. Its layer is the same for both: none of it is code.
func standInBase() (v1.ImageIndex, error) {
	files := map[string]string{ //nolint:gosec // G101: passwd lines of a stand-in image, no password in them
		"etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
		"etc/group":  "root:x:0:\nnonroot:x:65532:\n",
	}
	if certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		files["etc/ssl/certs/ca-certificates.crt"] = string(certs)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []struct {
		name string
		mode int64
		uid  int
	}{{"etc/", 0o755, 0}, {"etc/ssl/", 0o755, 0}, {"etc/ssl/certs/", 0o755, 0}, {"home/", 0o755, 0}, {"home/nonroot/", 0o700, 65532}, {"tmp/", 0o1777, 0}} {
		if err := tw.WriteHeader(&tar.Header{Name: dir.name, Typeflag: tar.TypeDir, Mode: dir.mode, Uid: dir.uid, Gid: dir.uid}); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))}); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return nil, err
	}
	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), layer)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = p.OS, p.Architecture
		// No user: the image's must come from the release's configuration.
		cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx, nil
}

// check reads the pushed image back and holds it to what the release
// promises: one index for both platforms under the version's tag (and
// latest, for a full release only), each image the agent built for its
// platform on the base, run as nonroot, with ko's SBOM beside it.
func check(repo name.Repository, version string, f flavour, baseIdx v1.ImageIndex, opts []remote.Option) error {
	tag := repo.Tag(version + f.suffix)
	desc, err := remote.Get(tag, opts...)
	if err != nil {
		return fmt.Errorf("the release pushed no %s: %w", tag, err)
	}
	if !desc.MediaType.IsIndex() {
		return fmt.Errorf("%s is a %s, not a multi-platform index", tag, desc.MediaType)
	}
	// latest is a full release's, never a prerelease's (a rehearsal's tag
	// is a prerelease).
	latestTag := "latest" + f.suffix
	if prerelease(version) {
		if _, err := remote.Head(repo.Tag(latestTag), opts...); err == nil {
			return fmt.Errorf("the prerelease %s moved %s", version, latestTag)
		}
		latestTag = "no " + latestTag + ", as a prerelease"
	} else {
		latest, err := remote.Head(repo.Tag(latestTag), opts...)
		if err != nil {
			return fmt.Errorf("the release pushed no %s: %w", repo.Tag(latestTag), err)
		}
		if latest.Digest != desc.Digest {
			return fmt.Errorf("%s is %s but %s is %s", tag, desc.Digest, latestTag, latest.Digest)
		}
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	var got []string
	for _, m := range im.Manifests {
		if m.Platform == nil {
			return fmt.Errorf("%s lists %s with no platform", tag, m.Digest)
		}
		got = append(got, m.Platform.String())
	}
	want := platformNames()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s holds platforms %v, want %v", tag, got, want)
	}
	var imageDigests []string
	for _, m := range im.Manifests {
		imageDigests = append(imageDigests, m.Digest.String())
	}
	if err := checkSBOM(repo, desc.Digest, "the index", imageDigests, opts); err != nil {
		return err
	}
	baseManifest, err := baseIdx.IndexManifest()
	if err != nil {
		return err
	}
	for _, m := range im.Manifests {
		p := *m.Platform
		img, err := idx.Image(m.Digest)
		if err != nil {
			return err
		}
		var baseImg v1.Image
		for _, bm := range baseManifest.Manifests {
			if bm.Platform.Equals(p) {
				if baseImg, err = baseIdx.Image(bm.Digest); err != nil {
					return err
				}
			}
		}
		if err := checkImage(img, baseImg, p, version, f.fips); err != nil {
			return fmt.Errorf("%s for %s: %w", tag, p, err)
		}
		if err := checkSBOM(repo, m.Digest, "the "+p.String()+" image", []string{module}, opts); err != nil {
			return err
		}
		built := ""
		if f.fips != "" {
			built = ", built with the FIPS module " + f.fips
		}
		fmt.Printf("imagecheck: %s@%s for %s: the agent %s%s on the base, as %s, with its SPDX SBOM\n", repo, m.Digest, p, version, built, nonroot)
	}
	fmt.Printf("imagecheck: %s is the index %s for %v (%s)\n", tag, desc.Digest, want, latestTag)
	return nil
}

// prerelease: a semantic version with a pre-release part (1.2.3-rc.1), as
// goreleaser's .Prerelease sees it; build metadata (+...) is not one.
func prerelease(version string) bool {
	core, _, _ := strings.Cut(version, "+")
	return strings.Contains(core, "-")
}

func checkImage(img, base v1.Image, p v1.Platform, version, fips string) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		return fmt.Errorf("its config says %s/%s", cf.OS, cf.Architecture)
	}
	if cf.Config.User != nonroot {
		return fmt.Errorf("it runs as %q, want %q", cf.Config.User, nonroot)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{entrypoint}) {
		return fmt.Errorf("its entrypoint is %q, want [%s]", cf.Config.Entrypoint, entrypoint)
	}
	// The kube-cert-agent helper pod runs "pinniped-agent" by PATH.
	if !slices.ContainsFunc(cf.Config.Env, func(e string) bool {
		return strings.HasPrefix(e, "PATH=") && slices.Contains(filepath.SplitList(strings.TrimPrefix(e, "PATH=")), filepath.Dir(entrypoint))
	}) {
		return fmt.Errorf("its PATH (%q) lacks %s, where the helper pod finds pinniped-agent", cf.Config.Env, filepath.Dir(entrypoint))
	}
	if v := cf.Config.Labels["org.opencontainers.image.version"]; v != version {
		return fmt.Errorf("its version label is %q, want %q", v, version)
	}
	if base == nil {
		return errors.New("the stand-in base has no image for this platform")
	}
	// Built on the base: the base's layers come first, unchanged.
	baseLayers, err := base.Layers()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) <= len(baseLayers) {
		return fmt.Errorf("it has %d layers, the base alone %d", len(layers), len(baseLayers))
	}
	for i, bl := range baseLayers {
		want, err := bl.Digest()
		if err != nil {
			return err
		}
		got, err := layers[i].Digest()
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("its layer %d is %s, not the base's %s", i, got, want)
		}
	}
	bin, err := readFile(img, strings.TrimPrefix(entrypoint, "/"))
	if err != nil {
		return err
	}
	return checkBinary(bin, p, version, fips)
}

// readFile returns one file of the image's flattened filesystem.
func readFile(img v1.Image, path string) ([]byte, error) {
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("it has no /%s", path)
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(h.Name, "/") == path && h.Typeflag == tar.TypeReg {
			if h.Mode&0o111 == 0 {
				return nil, fmt.Errorf("/%s is not executable (mode %o)", path, h.Mode)
			}
			return io.ReadAll(tr)
		}
	}
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkBinary: the agent, built by Go for the platform, static, of this
// version; run if this machine can.
func checkBinary(bin []byte, p v1.Platform, version, fips string) error {
	ef, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s is not an ELF binary: %w", entrypoint, err)
	}
	if want := elfMachine[p.Architecture]; ef.Machine != want {
		return fmt.Errorf("%s is for %s, want %s", entrypoint, ef.Machine, want)
	}
	if slices.ContainsFunc(ef.Progs, func(pr *elf.Prog) bool { return pr.Type == elf.PT_INTERP }) {
		return fmt.Errorf("%s is dynamically linked; the base has no libc", entrypoint)
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s has no Go build information: %w", entrypoint, err)
	}
	if bi.Path != agentPkg {
		return fmt.Errorf("%s is %s, want %s", entrypoint, bi.Path, agentPkg)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["GOOS"] != p.OS || settings["GOARCH"] != p.Architecture || settings["CGO_ENABLED"] != "0" {
		return fmt.Errorf("%s was built with GOOS=%s GOARCH=%s CGO_ENABLED=%s", entrypoint, settings["GOOS"], settings["GOARCH"], settings["CGO_ENABLED"])
	}
	// The flavour's crypto: Go records the FIPS module a binary was built
	// with as v1.0.0-<hash>; an ordinary build records none.
	if got := settings["GOFIPS140"]; (fips == "") != (got == "") || (fips != "" && got != fips && !strings.HasPrefix(got, fips+"-")) {
		return fmt.Errorf("%s was built with GOFIPS140=%q, want %q", entrypoint, got, fips)
	}
	// -ldflags -X main.version, for the platforms this machine cannot run:
	// the version must be in the binary more often than in its build
	// information, where Go puts the tag it was built at.
	if bytes.Count(bin, []byte(version)) <= strings.Count(bi.String(), version) {
		return fmt.Errorf("%s was not given its version %s (-X main.version)", entrypoint, version)
	}
	if p.OS != runtime.GOOS || p.Architecture != runtime.GOARCH {
		return nil
	}
	f, err := os.CreateTemp("", "pinniped-agent-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, err = f.Write(bin)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o700) //nolint:gosec // G302: executable by us alone
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, f.Name(), "version").CombinedOutput() //nolint:gosec // the binary under test
	if err != nil {
		return fmt.Errorf("%s version: %w\n%s", entrypoint, err, out)
	}
	if !strings.Contains(string(out), version) {
		return fmt.Errorf("%s version printed no %s:\n%s", entrypoint, version, out)
	}
	// What the binary itself says: FIPS mode on by default in the FIPS
	// flavour (buildinfo.FIPS), off in the other.
	if says := strings.Contains(string(out), "FIPS 140-3 mode, Go module "+fips); says != (fips != "") || (fips == "" && strings.Contains(string(out), "FIPS")) {
		return fmt.Errorf("%s version, built with GOFIPS140=%q, says:\n%s", entrypoint, fips, out)
	}
	return nil
}

// checkSBOM finds ko's SBOM for digest where cosign's tooling looks for it
// (the tag sha256-<hex>.sbom) and checks it is an SPDX document that
// describes that digest and names the packages wanted.
func checkSBOM(repo name.Repository, digest v1.Hash, what string, want []string, opts []remote.Option) error {
	ref := repo.Tag(digest.Algorithm + "-" + digest.Hex + ".sbom")
	img, err := remote.Image(ref, opts...)
	if err != nil {
		return fmt.Errorf("no SBOM for %s (%s): %w", what, ref, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) != 1 {
		return fmt.Errorf("the SBOM %s has %d layers, want 1", ref, len(layers))
	}
	mt, err := layers[0].MediaType()
	if err != nil {
		return err
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	doc, err := readSPDX(rc)
	if err != nil {
		return fmt.Errorf("the SBOM %s (%s): %w", ref, mt, err)
	}
	names := map[string]bool{}
	for _, p := range doc.Packages {
		names[p.Name] = true
	}
	for _, w := range append([]string{digest.String()}, want...) {
		if !names[w] {
			return fmt.Errorf("the SBOM of %s (%s) names no package %s", what, ref, w)
		}
	}
	return nil
}

// spdx is the part of an SPDX document the checks read.
type spdx struct {
	SPDXVersion string `json:"spdxVersion"`
	Packages    []struct {
		Name string `json:"name"`
	} `json:"packages"`
}

func readSPDX(r io.Reader) (spdx, error) {
	var doc spdx
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return doc, fmt.Errorf("not JSON: %w", err)
	}
	if !strings.HasPrefix(doc.SPDXVersion, "SPDX-") {
		return doc, errors.New("not an SPDX document")
	}
	return doc, nil
}
