//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// Bed is the test bed the tests run against; TestMain sets it.
var Bed *testbed.Bed

// RESTConfig is the admin's client configuration.
func RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	rc, err := Bed.RESTConfig()
	if err != nil {
		t.Fatalf("admin kubeconfig: %v", err)
	}
	return rc
}

// Client is a clientset with admin rights.
func Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(RESTConfig(t))
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// Run runs a program as a subprocess inside the bed (tests already run in its network
// namespace) with the admin kubeconfig in KUBECONFIG, and returns its stdout. It fails the
// test, showing stdout and stderr, if the program fails.
func Run(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	out, err := RunE(env, name, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// RunE is Run returning the error instead of failing the test.
func RunE(env []string, name string, args ...string) (string, error) {
	stdout, stderr, err := RunCmd(env, name, args...)
	if err != nil {
		return stdout, fmt.Errorf("%s %s: %w\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout, nil
}

// RunCmd runs a command in the bed's environment plus env, for at most 5
// minutes, and returns what it wrote to stdout and stderr apart, and how
// it ended: for a test that reads what a command says when it fails.
func RunCmd(env []string, name string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(BedEnv(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// BedEnv is the environment for subprocesses: ours, which TestMain set up with the admin
// KUBECONFIG and the bed's toolchain first on PATH (so "kubectl" is the cluster's version).
func BedEnv() []string {
	return append(os.Environ(), "KUBECONFIG="+Bed.Config().AdminKubeconfig())
}

// Kubectl runs kubectl as the admin and returns its stdout.
func Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	return Run(t, nil, "kubectl", args...)
}

// Eventually polls f until it returns nil or the timeout passes, then fails the test with
// what was awaited and f's last error.
func Eventually(t testing.TB, timeout time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		if last = f(ctx); last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not true after %s; last error: %v", what, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RepoRoot is the root of the pinniped module.
func RepoRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.CommandContext(context.Background(), "go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("find the module root (go env GOMOD): %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// BuildStatic builds a package of this module as a static binary (for an image) and returns
// its path. pkg is relative to the module root, e.g. "./cmd/pinniped-agent". For
// "./cmd/pinniped" it also builds pinniped-engine beside it, as a release unpacks them.
func BuildStatic(t testing.TB, pkg string) string {
	t.Helper()
	dir := t.TempDir()
	if pkg == "./cmd/pinniped" {
		buildStaticInto(t, "./cmd/pinniped-engine", dir)
	}
	return buildStaticInto(t, pkg, dir)
}

func buildStaticInto(t testing.TB, pkg, dir string) string {
	t.Helper()
	return buildStaticWith(t, pkg, dir, "")
}

// buildStaticWith is buildStaticInto with more -ldflags (say, another
// main.version: another build of the same code).
func buildStaticWith(t testing.TB, pkg, dir, ldflags string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	root := RepoRoot(t)
	// A cold static build of the agent takes minutes on 2 cores: take the machine-wide
	// heavy-build lock so it never runs beside another heavy build. Through the scripts'
	// own .ci/heavy-build.sh, which alone knows where the lock is (root's and other
	// accounts' differ): a path of its own here would drift from theirs.
	// Flags as a release builds them (goreleaser.yaml), so the tests and
	// benchmarks run what ships.
	// The commit stamped as in a release (goreleaser.yaml): pinniped doctor compares the
	// front's and the engine's. Only where git answers: in a checkout git refuses (another
	// user's, "dubious ownership"), -buildvcs=auto would fail the build.
	buildvcs := "-buildvcs=false"
	if exec.CommandContext(context.Background(), "git", "-C", root, "status", "--porcelain").Run() == nil {
		buildvcs = "-buildvcs=auto"
	}
	args := []string{"build", "-trimpath", buildvcs, "-ldflags=-s -w " + ldflags, "-o", out}
	// A GOFIPS140 of the caller's own would make an ordinary run's
	// binaries another flavour than it tests.
	env := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOFIPS140=") }), "CGO_ENABLED=0")
	if FIPSOnly(t) && strings.HasPrefix(pkg, "./cmd/") {
		env = append(env, "GOFIPS140="+FIPSModule)
		args = append(args, "-overlay="+fipsOnlyOverlay(t, root, pkg))
	}
	cmd := exec.CommandContext(context.Background(), filepath.Join(root, ".ci", "heavy-build.sh"), append(append([]string{"go"}, args...), pkg)...)
	cmd.Dir = root
	cmd.Env = env
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	return out
}

// FIPSModule is the Go FIPS 140-3 module the release's FIPS flavour is
// built with (goreleaser.yaml, make build-fips).
const FIPSModule = "v1.0.0"

// FIPSOnly says whether this run is `make e2e-fips` (PINNIPED_E2E_FIPS=only):
// pinniped's own binaries (the CLI, its engine, the agent and its helper)
// are then built as the release's FIPS flavour and run in fips140=only
// mode, where any cryptography outside the module fails instead of
// running. Everything else on the bed (Kubernetes, kubectl, Dex) stays as
// it is: the claim is about our binaries.
func FIPSOnly(t testing.TB) bool {
	switch v := os.Getenv("PINNIPED_E2E_FIPS"); v {
	case "":
		return false
	case "only":
		return true
	default:
		t.Fatalf("PINNIPED_E2E_FIPS=%q: the only value is \"only\" (make e2e-fips), or leave it unset", v)
		return false
	}
}

// fipsOnlyOverlay returns a go build -overlay file that adds
// "//go:debug fips140=only" to pkg's main package: the same as
// GODEBUG=fips140=only in the process's environment, but also for every
// process the bed starts from the binary (the agent's pods, the helper, the
// plugin kubectl runs) whatever environment it gets.
func fipsOnlyOverlay(t testing.TB, root, pkg string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "fips140_only.go")
	if err := os.WriteFile(src, []byte("//go:debug fips140=only\n\npackage main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, pkg, "zz_e2e_fips140_only.go"): src}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(path, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ImportImage builds a package as a static binary, packs it onto an empty image tagged by
// content under repo, imports it into the bed's containerd and returns the image reference
// (use imagePullPolicy: Never).
func ImportImage(t testing.TB, pkg, repo string) string {
	t.Helper()
	return importBinary(t, BuildStatic(t, pkg), repo)
}

// AgentImageVersion is AgentImage built as version: another build of the
// same code, for upgrade and rollback tests.
func AgentImageVersion(t testing.TB, version string) string {
	t.Helper()
	bin := buildStaticWith(t, "./cmd/pinniped-agent", t.TempDir(), "-X main.version="+version)
	return importBinary(t, bin, "localhost/pinniped-e2e/pinniped-agent")
}

func importBinary(t testing.TB, bin, repo string) string {
	t.Helper()
	ref, err := testbed.ImageRef(repo, bin)
	if err != nil {
		t.Fatal(err)
	}
	tar, err := testbed.CachedImage(bin, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := testbed.ImportImage(Bed.Config().ContainerdSocket(), tar); err != nil {
		t.Fatal(err)
	}
	return ref
}

// AgentImage builds ./cmd/pinniped-agent from the working tree into an image, imports it into
// the bed (once per test run) and returns its reference.
func AgentImage(t testing.TB) string {
	t.Helper()
	agentImage.Lock()
	defer agentImage.Unlock()
	if agentImage.ref == "" {
		agentImage.ref = ImportImage(t, "./cmd/pinniped-agent", "localhost/pinniped-e2e/pinniped-agent")
	}
	return agentImage.ref
}

var agentImage struct {
	sync.Mutex
	ref string
}

// ---- tmux, for TUI tests ----

// Tmux is a program running in a detached tmux session on a private tmux server.
type Tmux struct {
	t      testing.TB
	socket string
}

// NewTmux starts argv in a width x height terminal; the server is killed when the test ends.
func NewTmux(t testing.TB, width, height int, argv ...string) *Tmux {
	t.Helper()
	m := &Tmux{t: t, socket: fmt.Sprintf("pinniped-e2e-%d", time.Now().UnixNano())}
	args := append([]string{"new-session", "-d", "-s", "main", "-x", fmt.Sprint(width), "-y", fmt.Sprint(height), "--"}, argv...)
	m.tmux(args...)
	t.Cleanup(func() { _, _ = m.run("kill-server") })
	return m
}

func (m *Tmux) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// -f /dev/null: no user configuration; -L: a private server, never the user's.
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-L", m.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = BedEnv()
	// Only stdout is tmux's answer (a captured pane); stderr is for the error.
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out), nil
}

func (m *Tmux) tmux(args ...string) string {
	m.t.Helper()
	out, err := m.run(args...)
	if err != nil {
		m.t.Fatal(err)
	}
	return out
}

// SendLiteral types text as is (-l must come before the text).
func (m *Tmux) SendLiteral(text string) {
	m.t.Helper()
	m.tmux("send-keys", "-t", "main", "-l", "--", text)
}

// SendKeys sends tmux key names such as Enter, Up, C-c.
func (m *Tmux) SendKeys(keys ...string) {
	m.t.Helper()
	m.tmux(append([]string{"send-keys", "-t", "main"}, keys...)...)
}

// Screen returns what the terminal shows.
func (m *Tmux) Screen() string {
	m.t.Helper()
	return m.tmux("capture-pane", "-p", "-t", "main")
}

// ScreenE is Screen for a goroutine other than the test's: it returns the
// error instead of failing the test.
func (m *Tmux) ScreenE() (string, error) {
	return m.run("capture-pane", "-p", "-t", "main")
}

// WaitFor polls the screen until ok returns true, and fails the test showing the last screen.
func (m *Tmux) WaitFor(timeout time.Duration, what string, ok func(screen string) bool) string {
	m.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := m.Screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("tmux: %s: not shown after %s; screen:\n%s", what, timeout, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---- Dex ----

// DexHTTPClient trusts the bed's CA.
func DexHTTPClient(t testing.TB) *http.Client {
	t.Helper()
	c, err := Bed.DexHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// DexContext returns ctx carrying the Dex HTTP client, for go-oidc and x/oauth2.
func DexContext(t testing.TB, ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, DexHTTPClient(t))
}

// DexOAuth2 returns Dex's provider and an OAuth2 config for the bed's public client.
func DexOAuth2(t testing.TB, ctx context.Context, redirectURL string) (*oidc.Provider, *oauth2.Config) {
	t.Helper()
	p, err := oidc.NewProvider(DexContext(t, ctx), Bed.Config().DexIssuer())
	if err != nil {
		t.Fatalf("Dex discovery at %s: %v (log: %s)", Bed.Config().DexIssuer(), err, Bed.Config().LogFile("dex"))
	}
	return p, &oauth2.Config{
		ClientID:    testbed.DexClientID,
		Endpoint:    p.Endpoint(),
		RedirectURL: redirectURL,
		Scopes:      []string{oidc.ScopeOpenID, "email", "profile", "groups", oidc.ScopeOfflineAccess},
	}
}

// VerifyIDToken checks the signature, issuer, audience and expiry of a Dex ID token.
func VerifyIDToken(t testing.TB, ctx context.Context, raw string) *oidc.IDToken {
	t.Helper()
	p, _ := DexOAuth2(t, ctx, "")
	tok, err := p.Verifier(&oidc.Config{ClientID: testbed.DexClientID}).Verify(DexContext(t, ctx), raw)
	if err != nil {
		t.Fatalf("verify ID token: %v", err)
	}
	return tok
}

// PasswordLogin logs in with the resource owner password grant.
func PasswordLogin(t testing.TB, ctx context.Context, user testbed.DexUser) *oauth2.Token {
	t.Helper()
	_, conf := DexOAuth2(t, ctx, "")
	tok, err := conf.PasswordCredentialsToken(DexContext(t, ctx), user.Email, user.Password)
	if err != nil {
		t.Fatalf("password grant for %s: %v (log: %s)", user.Email, err, Bed.Config().LogFile("dex"))
	}
	return tok
}

// BrowserLogin logs in through headless Chromium with the authorization code flow and PKCE,
// with a loopback redirect like a CLI's, filling in Dex's login form. It returns the token
// response; the caller verifies the ID token (its nonce is checked here).
func BrowserLogin(t testing.TB, ctx context.Context, user testbed.DexUser) *oauth2.Token {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", l.Addr().(*net.TCPAddr).Port)
	p, conf := DexOAuth2(t, ctx, redirect)
	state, nonce, verifier := randomString(t), randomString(t), oauth2.GenerateVerifier()
	type result struct {
		code string
		err  error
	}
	results := make(chan result, 1)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		var res result
		switch {
		case q.Get("error") != "":
			res.err = fmt.Errorf("authorization error %s: %s", q.Get("error"), q.Get("error_description"))
		case q.Get("state") != state:
			res.err = errors.New("callback with wrong state")
		default:
			res.code = q.Get("code")
		}
		select {
		case results <- res:
		default:
		}
		fmt.Fprintln(w, "<html><body><p id=done>You can close this window.</p></body></html>")
	})}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	bctx, cancel := Browser(t, ctx)
	defer cancel()
	authURL := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))
	browserSteps(t, bctx, "browser login as "+user.Email,
		openPage(authURL, chromedp.WaitVisible(chromedp.ID("login"))),
		chromedp.SendKeys(chromedp.ID("login"), user.Email),
		chromedp.SendKeys(chromedp.ID("password"), user.Password),
		chromedp.Click(chromedp.ID("submit-login")),
		chromedp.WaitVisible(chromedp.ID("done")),
	)
	var res result
	select {
	case res = <-results:
	case <-time.After(10 * time.Second):
		t.Fatal("browser login: no callback")
	}
	if res.err != nil {
		t.Fatalf("browser login: %v", res.err)
	}
	tok, err := conf.Exchange(DexContext(t, ctx), res.code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange authorization code: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: testbed.DexClientID}).Verify(DexContext(t, ctx), raw)
	if err != nil {
		t.Fatalf("verify ID token from browser login: %v", err)
	}
	if idt.Nonce != nonce {
		t.Fatalf("ID token nonce %q, want %q", idt.Nonce, nonce)
	}
	return tok
}

// DeviceLogin logs in with the device authorization grant (RFC 8628): it asks Dex for a user
// code, lets headless Chromium play the user on another device (open the verification URL,
// submit the code, log in), and polls the token endpoint as a CLI would.
func DeviceLogin(t testing.TB, ctx context.Context, user testbed.DexUser) *oauth2.Token {
	t.Helper()
	_, conf := DexOAuth2(t, ctx, "")
	if conf.Endpoint.DeviceAuthURL == "" {
		t.Fatal("Dex discovery has no device_authorization_endpoint")
	}
	dctx := DexContext(t, ctx)
	da, err := conf.DeviceAuth(dctx)
	if err != nil {
		t.Fatalf("device authorization request: %v", err)
	}
	if da.UserCode == "" || da.VerificationURIComplete == "" {
		t.Fatalf("device authorization response lacks user code or complete URI: %+v", da)
	}
	bctx, cancel := Browser(t, ctx)
	defer cancel()
	browserSteps(t, bctx, "device login in the browser as "+user.Email,
		openPage(da.VerificationURIComplete, chromedp.WaitVisible(chromedp.ID("user_code"))),
		chromedp.Click(chromedp.ID("submit-login")),
		chromedp.WaitVisible(chromedp.ID("login")),
		chromedp.SendKeys(chromedp.ID("login"), user.Email),
		chromedp.SendKeys(chromedp.ID("password"), user.Password),
		chromedp.Click(chromedp.ID("submit-login")),
		chromedp.WaitVisible(chromedp.Search("//h2[contains(., 'Login Successful')]")),
	)
	pctx, pcancel := context.WithTimeout(dctx, 30*time.Second)
	defer pcancel()
	tok, err := conf.DeviceAccessToken(pctx, da)
	if err != nil {
		t.Fatalf("device access token: %v", err)
	}
	return tok
}

// pageState describes where the browser is, for failure messages: its URL and visible text.
func pageState(bctx context.Context) string {
	// bctx may be the one that timed out; ask on a fresh deadline in the same tab.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(bctx), 5*time.Second)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return fmt.Sprintf("(browser state unavailable: %v)\n", err)
	}
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
	if len(text) > 2000 {
		text = text[:2000] + "..."
	}
	return fmt.Sprintf("browser at %s showing:\n%s\n", loc, text)
}

// Browser starts headless Chromium with a fresh profile that trusts exactly the bed's Dex
// test Supervisor and second OpenID provider (oidcop) serving keys (by SPKI hash) and
// returns a chromedp context.
func Browser(t testing.TB, ctx context.Context) (context.Context, context.CancelFunc) {
	t.Helper()
	var hashes []string
	for _, cert := range []string{"dex.crt", "supervisor.crt", "oidcop.crt"} {
		h, err := spkiHash(filepath.Join(Bed.Config().PKIDir(), cert))
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	spki := strings.Join(hashes, ",")
	home := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		// A private HOME and the basic password store keep Chromium from D-Bus-activating
		// a gnome-keyring of its own (which would take the Secret Service name from the
		// tests' keyring) and from writing into the real home directory. NO_AT_BRIDGE stops
		// it from activating the accessibility bus.
		chromedp.Env("HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "NO_AT_BRIDGE=1"),
		chromedp.Flag("password-store", "basic"),
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // we run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(filepath.Join(home, "profile")),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", spki),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelCtx := chromedp.NewContext(actx)
	// The first action starts the browser and binds its lifetime to the context it runs on:
	// start it on bctx, so that step timeouts (child contexts) do not kill it and a failing
	// test can still ask the browser where it is.
	if err := chromedp.Do(bctx); err != nil {
		cancelCtx()
		cancelAlloc()
		t.Fatalf("start Chromium: %v", err)
	}
	return bctx, func() { cancelCtx(); cancelAlloc() }
}

// browserSteps runs chromedp steps with a deadline, failing the test with the browser's
// state (URL and page text) if they do not complete.
func browserSteps(t testing.TB, bctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\n%s(the identity providers' logs: %s, %s)", what, err, pageState(bctx), Bed.Config().LogFile("dex"), Bed.Config().LogFile("oidcop"))
	}
}

// openPage navigates to url and waits for ready to show, trying again
// when the load itself fails (a net::ERR_ error). Chromium drops a page that is loading when the
// machine's network changes (net::ERR_NETWORK_CHANGED), and the bed's
// network does change while a test runs: every pod that starts adds an
// interface. A login page loaded twice is harmless (each load is a new
// authorization request).
func openPage(url string, ready chromedp.Action[chromedp.Void]) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		var errs []error
		for attempt := 1; attempt <= 3; attempt++ {
			actx, cancel := context.WithTimeout(ctx, 20*time.Second)
			_, err := chromedp.Steps(chromedp.Navigate(url), ready)(actx, tgt)
			cancel()
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
			// Only a failed load is tried again: anything else (an error
			// page, a form that never shows) is the test's to report.
			if ctx.Err() != nil || !strings.Contains(err.Error(), "net::ERR_") {
				break
			}
		}
		return errors.Join(errs...)
	})
}

func chromiumPath(t testing.TB) string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: run e2e/scripts/install-deps.sh")
	return ""
}

func spkiHash(certFile string) (string, error) {
	raw, err := os.ReadFile(certFile)
	if err != nil {
		return "", err
	}
	blk, _ := pem.Decode(raw)
	if blk == nil {
		return "", fmt.Errorf("no PEM in %s", certFile)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

func randomString(t testing.TB) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ---- Keyring ----

var keyringDaemon struct {
	sync.Mutex
	cmd  *exec.Cmd
	home string
	err  error
}

// KeyringSession makes sure a real Secret Service (gnome-keyring-daemon, unlocked) runs on
// this test process's private D-Bus session bus (TestMain runs the tests under
// dbus-run-session), so go-keyring and subprocesses that use the keyring work. The daemon
// lives until the end of the run; its data lives in a temporary HOME.
func KeyringSession(t testing.TB) {
	t.Helper()
	keyringDaemon.Lock()
	defer keyringDaemon.Unlock()
	if keyringDaemon.cmd == nil && keyringDaemon.err == nil {
		keyringDaemon.cmd, keyringDaemon.home, keyringDaemon.err = startKeyring()
	}
	if keyringDaemon.err != nil {
		t.Fatalf("keyring: %v", keyringDaemon.err)
	}
}

func startKeyring() (cmd *exec.Cmd, home string, err error) {
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		return nil, "", errors.New("DBUS_SESSION_BUS_ADDRESS is not set: the tests must run under dbus-run-session (TestMain does this)")
	}
	if secretServiceOwned() {
		return nil, "", errors.New("org.freedesktop.secrets is already owned on this session bus by a program the tests did not start; the tests' keyring cannot be started")
	}
	home, err = os.MkdirTemp("", "pinniped-e2e-keyring-") // 0700
	if err != nil {
		return nil, "", err
	}
	cmd = exec.CommandContext(context.Background(), "gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"), "XDG_RUNTIME_DIR="+home)
	cmd.Stdin = strings.NewReader("e2e-keyring-password") // --unlock reads the password here
	var logBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(home)
		return nil, "", fmt.Errorf("start gnome-keyring-daemon: %w (run e2e/scripts/install-deps.sh)", err)
	}
	// Ready when org.freedesktop.secrets is owned on the bus.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if secretServiceOwned() {
			return cmd, home, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	_ = os.RemoveAll(home)
	return nil, "", fmt.Errorf("gnome-keyring-daemon did not register org.freedesktop.secrets within 10s; its output:\n%s", logBuf.String())
}

// secretServiceOwned asks the bus whether a Secret Service is registered (without
// activating one, which a plain call to org.freedesktop.secrets would do).
func secretServiceOwned() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.secrets").Output()
	return strings.Contains(string(out), "boolean true")
}

// stopKeyring stops the keyring daemon this process started, by PID.
func stopKeyring() {
	keyringDaemon.Lock()
	defer keyringDaemon.Unlock()
	if keyringDaemon.cmd != nil && keyringDaemon.cmd.Process != nil {
		_ = keyringDaemon.cmd.Process.Kill()
		_ = keyringDaemon.cmd.Wait()
		_ = os.RemoveAll(keyringDaemon.home)
	}
}

// ---- aggregated APIs served by processes of the test run ----

// LocalAPIService makes kube-apiserver route group/version to a server that this test run
// starts as a process listening on 127.0.0.1:port. kube-apiserver shares the bed's network
// namespace, so 127.0.0.1 is the same loopback. Endpoints reject loopback addresses, but the
// bed runs kube-apiserver with --enable-aggregator-routing=false and a Service of type
// ExternalName with externalName 127.0.0.1 routes to https://127.0.0.1:<port>. The server's
// certificate must be valid for the returned name (<service>.<namespace>.svc) and signed by
// caBundle. Everything is deleted when the test ends.
func LocalAPIService(t testing.TB, namespace, group, version string, port int, caBundle []byte) (serviceDNSName string) {
	t.Helper()
	svc := "local-" + strings.ReplaceAll(group, ".", "-")
	if len(svc) > 63 {
		svc = svc[:63]
	}
	f := filepath.Join(t.TempDir(), "apiservice.yaml")
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  type: ExternalName
  externalName: 127.0.0.1
  ports: [{port: %[3]d}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: %[4]s.%[5]s}
spec:
  group: %[5]s
  version: %[4]s
  groupPriorityMinimum: 1000
  versionPriority: 10
  caBundle: %[6]s
  service: {name: %[1]s, namespace: %[2]s, port: %[3]d}
`, svc, namespace, port, version, group, base64.StdEncoding.EncodeToString(caBundle))
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	Kubectl(t, "apply", "-f", f)
	t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "--ignore-not-found", "--wait=false", "-f", f) })
	return svc + "." + namespace + ".svc"
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartProcess starts a long-running program for the rest of the test (stopped and waited
// for at cleanup) with its output going to the test log when the test fails.
func StartProcess(t testing.TB, name string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.CommandContext(context.Background(), name, args...)
	cmd.Env = BedEnv()
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("output of %s %s:\n%s", name, strings.Join(args, " "), out.String())
		}
	})
}

// ---- a bare pseudo-terminal ----

// RunInBarePTY runs argv with a new pseudo-terminal as its stdin, stdout and
// stderr, of the size nobody set: 0 columns by 0 rows, as `script`, a bare
// pty or an IDE's task runner before it lays out gives. It returns what the
// program wrote to the terminal and its exit code.
func RunInBarePTY(t *testing.T, timeout time.Duration, env []string, argv ...string) (string, int) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	fd := int(master.Fd()) //nolint:gosec // fd fits in int
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ws, err := unix.IoctlGetWinsize(int(slave.Fd()), unix.TIOCGWINSZ); err != nil || ws.Col != 0 || ws.Row != 0 { //nolint:gosec // fd fits in int
		t.Fatalf("the new pty is not 0x0: %+v %v", ws, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = slave.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&out, master); close(copied) }() // ends with EIO once the last writer is gone
	err = cmd.Wait()
	<-copied
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return out.String(), code
}
