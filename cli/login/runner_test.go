package login_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin/oidctest"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// browserUI plays a person whose browser logs in at once.
type browserUI struct {
	ca        []byte
	opened    atomic.Int64
	successes atomic.Int64
	summary   atomic.Pointer[loginview.Summary]
	requests  chan loginview.Request
	// idle: the browser never logs in; the person uses the requests instead.
	idle         bool
	onDeviceCode func()
	// answers reply to Ask, by prompt; asked records the prompts.
	answers map[string]string
	asked   []string
	// warnings records Warn's problems.
	mu       sync.Mutex
	warnings []string
	// steps records Step's messages.
	steps []string
}

func (u *browserUI) Step(msg string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.steps = append(u.steps, msg)
}
func (u *browserUI) Warn(problem, _ string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.warnings = append(u.warnings, problem)
}
func (u *browserUI) ShowLoginURL(string) {}
func (u *browserUI) ShowDeviceCode(string, string, string) {
	if u.onDeviceCode != nil {
		u.onDeviceCode()
	}
}
func (u *browserUI) Success(s loginview.Summary) { u.successes.Add(1); u.summary.Store(&s) }
func (u *browserUI) PromptCode(ctx context.Context, _ string) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

func (u *browserUI) Ask(ctx context.Context, prompt string, secret bool) (string, error) {
	if u.answers == nil {
		return "", errors.New("no answers")
	}
	u.asked = append(u.asked, prompt)
	return u.answers[prompt], nil
}

func (u *browserUI) Requests() <-chan loginview.Request { return u.requests }

func (u *browserUI) OpenBrowser(url string) error {
	u.opened.Add(1)
	if u.idle {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(u.ca)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	go func() {
		resp, err := c.Get(url) //nolint:noctx // test browser
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}()
	return nil
}

type harness struct {
	idp       *oidctest.Provider
	clk       *clock
	ui        *browserUI
	store     *filestore.Store
	lockDir   string
	discovers atomic.Int64
	exchanges atomic.Int64
}

func newHarness(t *testing.T) *harness {
	clk := &clock{t: time.Now().Truncate(time.Second)}
	idp := oidctest.New(t)
	idp.Now = clk.now
	dir := t.TempDir()
	return &harness{idp: idp, clk: clk, ui: &browserUI{ca: idp.CABundle}, store: &filestore.Store{Dir: dir + "/creds"}, lockDir: dir + "/locks"}
}

func (h *harness) engine(out io.Writer) *login.Runner {
	return &login.Runner{
		Store: h.store, LockDir: h.lockDir, Now: h.clk.now, UI: h.ui, Stdout: out,
		Discover: func(ctx context.Context) (login.Provider, error) {
			h.discovers.Add(1)
			return oidclogin.Discover(ctx, &config.OIDC{Issuer: h.idp.URL, ClientID: h.idp.ClientID,
				Scopes: []string{"openid", "offline_access"}, CABundle: h.idp.CABundle}, h.clk.now)
		},
		Exchange: func(_ context.Context, _ *config.Concierge, token string) (*loginv1alpha1.ClusterCredential, error) {
			h.exchanges.Add(1)
			if token == "" {
				return nil, errors.New("empty token")
			}
			return &loginv1alpha1.ClusterCredential{ClientCertificateData: "cert", ClientKeyData: "key",
				ExpirationTimestamp: metav1.NewTime(h.clk.now().Add(5 * time.Minute))}, nil
		},
	}
}

func (h *harness) request(concierge bool) *config.OIDC {
	r := &config.OIDC{Issuer: h.idp.URL, ClientID: h.idp.ClientID, Scopes: []string{"openid", "offline_access"}, CABundle: h.idp.CABundle}
	if concierge {
		r.Concierge = &config.Concierge{Endpoint: "https://cluster", AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	}
	return r
}

var interactive = &execcred.Request{APIVersion: execcred.V1, Interactive: true}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("stdout is not one ExecCredential: %q", b)
	}
	return m
}

func TestDecisionOrder(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	run := func(r *config.OIDC, exec *execcred.Request) (map[string]any, error) {
		var out bytes.Buffer
		err := h.engine(&out).LoginOIDC(ctx, r, exec)
		if err != nil {
			return nil, err
		}
		return decode(t, out.Bytes()), nil
	}

	// 4. Nothing cached: interactive browser login, then the exchange.
	got, err := run(h.request(true), interactive)
	if err != nil {
		t.Fatal(err)
	}
	if got["status"].(map[string]any)["clientCertificateData"] != "cert" || h.idp.AuthCodeGrants.Load() != 1 || h.exchanges.Load() != 1 {
		t.Fatalf("first login: %v, grants %d, exchanges %d", got, h.idp.AuthCodeGrants.Load(), h.exchanges.Load())
	}

	// 1. Cached credential: no discovery, no grant, no exchange.
	d, x := h.discovers.Load(), h.exchanges.Load()
	if _, err := run(h.request(true), interactive); err != nil {
		t.Fatal(err)
	}
	if h.discovers.Load() != d || h.exchanges.Load() != x {
		t.Fatal("a cached credential should need no network at all")
	}

	// 2. Credential expired (5 min), ID token still good for > 10 min:
	// exchange again, no grant.
	h.clk.add(6 * time.Minute)
	if _, err := run(h.request(true), interactive); err != nil {
		t.Fatal(err)
	}
	if h.exchanges.Load() != x+1 || h.idp.AuthCodeGrants.Load() != 1 || h.idp.RefreshGrants.Load() != 0 {
		t.Fatalf("cached ID token path: exchanges %d, code %d, refresh %d", h.exchanges.Load(), h.idp.AuthCodeGrants.Load(), h.idp.RefreshGrants.Load())
	}

	// 3. ID token within 10 min of expiry: refresh, no browser.
	h.clk.add(45 * time.Minute)
	if _, err := run(h.request(true), &execcred.Request{APIVersion: execcred.V1beta1, Interactive: false}); err != nil {
		t.Fatalf("refresh must work without a person: %v", err)
	}
	if h.idp.RefreshGrants.Load() != 1 || h.ui.opened.Load() != 1 {
		t.Fatalf("refresh path: refresh %d, browsers %d", h.idp.RefreshGrants.Load(), h.ui.opened.Load())
	}

	// Refresh revoked and kubectl runs without a terminal (an IDE, a
	// pipe): a browser login needs none, so it still runs.
	h.clk.add(2 * time.Hour)
	h.idp.FailRefresh.Store(true)
	if _, err := run(h.request(true), &execcred.Request{APIVersion: execcred.V1, Interactive: false}); err != nil {
		t.Fatalf("non-interactive: %v", err)
	}
	if h.ui.opened.Load() != 2 || h.idp.AuthCodeGrants.Load() != 2 {
		t.Fatalf("non-interactive: browsers %d, code grants %d", h.ui.opened.Load(), h.idp.AuthCodeGrants.Load())
	}
	// The refused refresh is a step, which a quiet view shows only once the
	// login needs the person; a warning would be drawn at once.
	h.ui.mu.Lock()
	defer h.ui.mu.Unlock()
	if !slices.ContainsFunc(h.ui.steps, func(s string) bool { return strings.HasPrefix(s, "could not refresh the session") }) ||
		slices.ContainsFunc(h.ui.warnings, func(s string) bool { return strings.Contains(s, "refresh") }) {
		t.Fatalf("the refused refresh: steps %q, warnings %q", h.ui.steps, h.ui.warnings)
	}
}

func TestIDTokenWithoutConcierge(t *testing.T) {
	h := newHarness(t)
	var out bytes.Buffer
	if err := h.engine(&out).LoginOIDC(context.Background(), h.request(false), &execcred.Request{APIVersion: execcred.V1beta1, Interactive: true}); err != nil {
		t.Fatal(err)
	}
	m := decode(t, out.Bytes())
	if m["apiVersion"] != execcred.V1beta1 || m["status"].(map[string]any)["token"] == "" || h.exchanges.Load() != 0 {
		t.Fatalf("%v", m)
	}
}

func TestPasswordFlow(t *testing.T) {
	h := newHarness(t)
	r := h.request(true)
	r.Flow, r.Username, r.Password = config.FlowPassword, "alice", "password"
	var out bytes.Buffer
	// Password logins work without a terminal: that is what CI needs.
	if err := h.engine(&out).LoginOIDC(context.Background(), r, &execcred.Request{APIVersion: execcred.V1, Interactive: false}); err != nil {
		t.Fatal(err)
	}
	if h.idp.PasswordGrants.Load() != 1 || h.ui.opened.Load() != 0 {
		t.Fatal("password flow not used")
	}
	r.Password = ""
	h2 := newHarness(t)
	r2 := h2.request(true)
	r2.Flow, r2.Username = config.FlowPassword, "alice"
	if err := h2.engine(io.Discard).LoginOIDC(context.Background(), r2, interactive); err == nil {
		t.Fatal("password flow without PINNIPED_PASSWORD accepted")
	}
}

// TestFailedLoginSaysTheRefreshFailed: when the refresh is refused and
// the login that follows fails without asking anyone (a password login
// without the password), the error still says why a login was needed: the
// step saying so is shown only to a person who is asked.
func TestFailedLoginSaysTheRefreshFailed(t *testing.T) {
	h := newHarness(t)
	r := h.request(true)
	r.Flow, r.Username, r.Password = config.FlowPassword, "alice", "password"
	unattended := &execcred.Request{APIVersion: execcred.V1, Interactive: false}
	if err := h.engine(io.Discard).LoginOIDC(context.Background(), r, unattended); err != nil {
		t.Fatal(err)
	}
	h.clk.add(3 * time.Hour)
	h.idp.FailRefresh.Store(true)
	r.Password = ""
	err := h.engine(io.Discard).LoginOIDC(context.Background(), r, unattended)
	if err == nil || !strings.Contains(err.Error(), "the session could not be refreshed") {
		t.Fatalf("the failed login does not name the refused refresh: %v", err)
	}
}

// TestConcurrentLoginsShareOne: twenty racing invocations on an empty cache
// cause exactly one login and one exchange; all print the same credential.
func TestConcurrentLoginsShareOne(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 20)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.engine(&outs[i]).LoginOIDC(context.Background(), h.request(true), interactive); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if h.idp.AuthCodeGrants.Load() != 1 || h.exchanges.Load() != 1 || h.ui.opened.Load() != 1 {
		t.Fatalf("logins %d, exchanges %d, browsers %d; want 1 each", h.idp.AuthCodeGrants.Load(), h.exchanges.Load(), h.ui.opened.Load())
	}
	for i := range outs {
		decode(t, outs[i].Bytes())
	}
}

func TestCorruptSessionIsIgnored(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if err := h.engine(io.Discard).LoginOIDC(ctx, h.request(false), interactive); err != nil {
		t.Fatal(err)
	}
	// Corrupt every stored value; the next run must log in again, not crash.
	files, _ := filepath.Glob(filepath.Join(h.store.Dir, "*.cred"))
	if len(files) == 0 {
		t.Fatal("nothing was cached")
	}
	for _, f := range files {
		if err := os.WriteFile(f, []byte("{corrupt"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.engine(io.Discard).LoginOIDC(ctx, h.request(false), interactive); err != nil {
		t.Fatal(err)
	}
	if h.idp.AuthCodeGrants.Load() != 2 {
		t.Fatalf("grants %d", h.idp.AuthCodeGrants.Load())
	}
}

func TestStatic(t *testing.T) {
	h := newHarness(t)
	var out bytes.Buffer
	if err := h.engine(&out).LoginStatic(context.Background(), &config.Static{Token: "tok"}, interactive); err != nil {
		t.Fatal(err)
	}
	if decode(t, out.Bytes())["status"].(map[string]any)["token"] != "tok" {
		t.Fatal(out.String())
	}
	conc := &config.Concierge{Endpoint: "https://c", AuthenticatorType: "webhook", AuthenticatorName: "w"}
	for range 2 {
		if err := h.engine(io.Discard).LoginStatic(context.Background(), &config.Static{Token: "tok", Concierge: conc}, interactive); err != nil {
			t.Fatal(err)
		}
	}
	if h.exchanges.Load() != 1 {
		t.Fatalf("static exchanges %d, want 1 (cached)", h.exchanges.Load())
	}
}

// TestSwitchToDeviceFlow: the person asks the waiting browser flow for the
// device flow; the engine runs it, and the login completes and is cached.
func TestSwitchToDeviceFlow(t *testing.T) {
	h := newHarness(t)
	h.ui.idle = true
	h.ui.requests = make(chan loginview.Request, 1)
	h.ui.requests <- loginview.RequestDeviceFlow
	h.ui.onDeviceCode = h.idp.ApproveDevice
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.engine(&out).LoginOIDC(ctx, h.request(true), interactive); err != nil {
		t.Fatal(err)
	}
	if h.idp.DeviceGrants.Load() != 1 || h.idp.AuthCodeGrants.Load() != 0 || h.ui.successes.Load() != 1 {
		t.Fatalf("device grants %d, code grants %d, successes %d", h.idp.DeviceGrants.Load(), h.idp.AuthCodeGrants.Load(), h.ui.successes.Load())
	}
	decode(t, out.Bytes())
}

// TestCanceledLoginCachesNothing: cancelling (the TUI's q) ends the login
// with the cancel cause, prints no credential and leaves no session behind.
func TestCanceledLoginCachesNothing(t *testing.T) {
	h := newHarness(t)
	h.ui.idle = true
	errCanceled := errors.New("canceled by you")
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel(errCanceled) }()
	var out bytes.Buffer
	err := h.engine(&out).LoginOIDC(ctx, h.request(true), interactive)
	if !errors.Is(err, errCanceled) {
		t.Fatalf("want the cancel cause, got %v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("a cancelled login printed %q", out.String())
	}
	entries, _ := os.ReadDir(h.store.Dir)
	if len(entries) != 0 {
		t.Fatalf("a cancelled login cached %d entries", len(entries))
	}
}

// TestOneRefreshPerSession: kubectl calls for two clusters behind one login
// need the same session refreshed at the same moment. Refresh tokens that
// rotate work once, so only one refresh may run; the other call uses its
// result instead of failing over to a new login.
func TestOneRefreshPerSession(t *testing.T) {
	h := newHarness(t)
	h.idp.SingleUseRefresh.Store(true)
	ctx := context.Background()
	clusterA, clusterB := h.request(true), h.request(true)
	clusterB.Concierge = &config.Concierge{Endpoint: "https://cluster-b", AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	if err := h.engine(io.Discard).LoginOIDC(ctx, clusterA, interactive); err != nil {
		t.Fatal(err)
	}
	// Both clusters' credentials expired and the ID token is within 10
	// minutes of its end: both calls need a refresh.
	h.clk.add(55 * time.Minute)
	nobody := &execcred.Request{APIVersion: execcred.V1, Interactive: false}
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, r := range []*config.OIDC{clusterA, clusterB} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = h.engine(io.Discard).LoginOIDC(ctx, r, nobody)
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: %v / %v", round, errs[0], errs[1])
		}
		if got := h.idp.RefreshGrants.Load(); got != int64(round+1) || h.idp.AuthCodeGrants.Load() != 1 {
			t.Fatalf("round %d: %d refreshes (want %d), %d logins (want 1)", round, got, round+1, h.idp.AuthCodeGrants.Load())
		}
		h.clk.add(55 * time.Minute)
	}
}

// TestDebugSaysWhatAndWhyNeverASecret: PINNIPED_DEBUG's lines name the
// cache, the session's state and the flow, and no token.
func TestDebugSaysWhatAndWhyNeverASecret(t *testing.T) {
	h := newHarness(t)
	var lines []string
	var mu sync.Mutex
	run := func() {
		e := h.engine(io.Discard)
		e.Debug = func(format string, args ...any) {
			mu.Lock()
			lines = append(lines, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		if err := e.LoginOIDC(context.Background(), h.request(true), interactive); err != nil {
			t.Fatal(err)
		}
	}
	run()
	run()
	all := strings.Join(lines, "\n")
	for _, want := range []string{"none cached", "logging in (browser)", "trading the token at https://cluster with jwt dex", "done in", "cached in " + h.store.Describe()} {
		if !strings.Contains(all, want) {
			t.Errorf("debug lacks %q:\n%s", want, all)
		}
	}
	files, _ := filepath.Glob(filepath.Join(h.store.Dir, "*.cred"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		var v map[string]any
		_ = json.Unmarshal(raw, &v)
		for _, field := range []string{"idToken", "accessToken", "refreshToken"} {
			if tok, _ := v[field].(string); tok != "" && strings.Contains(all, tok) {
				t.Fatalf("debug shows the %s", field)
			}
		}
	}
}

// TestNoCredentialCacheKeepsTheSession: upstream's --credential-cache=""
// caches no cluster credential, but the session still saves a login.
func TestNoCredentialCacheKeepsTheSession(t *testing.T) {
	h := newHarness(t)
	for range 2 {
		e := h.engine(io.Discard)
		e.NoCredentialCache = true
		if err := e.LoginOIDC(context.Background(), h.request(true), interactive); err != nil {
			t.Fatal(err)
		}
	}
	if h.idp.AuthCodeGrants.Load() != 1 || h.exchanges.Load() != 2 {
		t.Fatalf("logins %d (want 1: the session), exchanges %d (want 2: no credential cache)", h.idp.AuthCodeGrants.Load(), h.exchanges.Load())
	}
}

// TestExchangeUsesTheCachedAccessToken: a login that trades its token for
// the cluster's audience needs only its access token to be valid (as
// upstream), so the Supervisor's 2-minute ID tokens do not make every
// credential-cache miss refresh and rotate the refresh token.
func TestExchangeUsesTheCachedAccessToken(t *testing.T) {
	h := newHarness(t)
	h.idp.IDTokenTTL = 2 * time.Minute
	r := h.request(false)
	r.RequestAudience = "cluster-a"
	run := func() {
		t.Helper()
		e := h.engine(io.Discard)
		e.NoCredentialCache = true
		if err := e.LoginOIDC(context.Background(), r, interactive); err != nil {
			t.Fatal(err)
		}
	}
	run()
	h.clk.add(5 * time.Minute) // the ID token is gone; the access token (1 h) is not
	run()
	if h.idp.AuthCodeGrants.Load() != 1 || h.idp.RefreshGrants.Load() != 0 || h.idp.ExchangeGrants.Load() != 2 {
		t.Fatalf("logins %d, refreshes %d, exchanges %d; want 1, 0, 2", h.idp.AuthCodeGrants.Load(), h.idp.RefreshGrants.Load(), h.idp.ExchangeGrants.Load())
	}
	h.clk.add(54*time.Minute + 55*time.Second) // 5 s left on the access token
	run()
	if h.idp.RefreshGrants.Load() != 1 || h.idp.ExchangeGrants.Load() != 3 {
		t.Fatalf("refreshes %d, exchanges %d; want 1, 3", h.idp.RefreshGrants.Load(), h.idp.ExchangeGrants.Load())
	}
}

// TestUnwritableCacheStillLogsIn: a cache directory that can hold neither
// locks nor credentials (here a path under a regular file; a read-only or
// full disk in e2e) costs the login nothing: kubectl gets its credential,
// and the person is told the cache could not be written.
func TestUnwritableCacheStillLogsIn(t *testing.T) {
	h := newHarness(t)
	blocked := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h.store = &filestore.Store{Dir: filepath.Join(blocked, "creds")}
	h.lockDir = filepath.Join(blocked, "locks")
	r := h.request(true)
	r.Flow, r.Username, r.Password = config.FlowPassword, "alice", "password"
	var out bytes.Buffer
	if err := h.engine(&out).LoginOIDC(context.Background(), r, &execcred.Request{APIVersion: execcred.V1}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"clientKeyData":"key"`) {
		t.Fatalf("kubectl got %q", out.String())
	}
	warned := strings.Join(h.ui.warnings, "\n")
	for _, want := range []string{"could not take the login lock", "could not cache the credential"} {
		if strings.Count(warned, want) != 1 {
			t.Errorf("want the warning %q once in %q", want, warned)
		}
	}
}

// --present-token=access shows the cluster the access token, and a second
// call answers from the session the access token's expiry allows.
func TestPresentTheAccessToken(t *testing.T) {
	h := newHarness(t)
	req := h.request(false)
	req.PresentToken = config.PresentAccess
	req.CredentialCache = "none" // each call reads the session
	// An opaque access token is refused before any cluster sees it.
	if err := h.engine(io.Discard).LoginOIDC(context.Background(), req, interactive); err == nil || !strings.Contains(err.Error(), "not a JWT") {
		t.Fatalf("an opaque access token: %v", err)
	}
	h = newHarness(t)
	h.idp.JWTAccessTokens = true
	req = h.request(false)
	req.PresentToken = config.PresentAccess
	req.CredentialCache = "none"
	for i := range 2 {
		var out bytes.Buffer
		if err := h.engine(&out).LoginOIDC(context.Background(), req, interactive); err != nil {
			t.Fatal(err)
		}
		tok, _ := decode(t, out.Bytes())["status"].(map[string]any)["token"].(string)
		if payload := strings.Split(tok, "."); len(payload) != 3 || !strings.Contains(decodeSegment(t, payload[1]), `"aud":"api://default"`) {
			t.Fatalf("call %d presented %q, want the access token", i, tok)
		}
	}
	if n := h.idp.AuthCodeGrants.Load() + h.idp.RefreshGrants.Load(); n != 1 {
		t.Fatalf("%d grants for two calls", n)
	}
}

// The summary says who the cluster will see, as the certificate names them
// (the authenticator's mappings decide, not the token); a refused exchange
// lists the token's claim names, never their values.
func TestWhatTheClusterSees(t *testing.T) {
	h := newHarness(t)
	ca, err := certauthority.New("cluster", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	refuse := false
	e := h.engine(io.Discard)
	e.Exchange = func(_ context.Context, _ *config.Concierge, _ string) (*loginv1alpha1.ClusterCredential, error) {
		if refuse {
			return nil, fmt.Errorf("%w: authentication failed", login.ErrRefused)
		}
		issued, err := ca.IssueClientCert("oidc:alice", "", []string{"oidc:devs"}, time.Minute)
		if err != nil {
			return nil, err
		}
		return &loginv1alpha1.ClusterCredential{ClientCertificateData: string(issued.CertPEM), ClientKeyData: string(issued.KeyPEM),
			ExpirationTimestamp: metav1.NewTime(issued.NotAfter)}, nil
	}
	if err := e.LoginOIDC(context.Background(), h.request(true), interactive); err != nil {
		t.Fatal(err)
	}
	if s := h.ui.summary.Load(); s == nil || s.Username != "oidc:alice" || !slices.Equal(s.Groups, []string{"oidc:devs"}) {
		t.Fatalf("summary %+v", s)
	}

	refuse = true
	req := h.request(true)
	req.Concierge.AuthenticatorName = "other" // another credential key
	err = e.LoginOIDC(context.Background(), req, interactive)
	if !errors.Is(err, login.ErrRefused) || !strings.Contains(err.Error(), "aud, ") || !strings.Contains(err.Error(), "iss,") || strings.Contains(err.Error(), h.idp.URL) {
		t.Fatalf("got %v", err)
	}
}

// TestWhatTheClusterSeesThroughAProxyToken: the impersonation proxy answers
// with a token and no certificate; the summary shows whom the token names
// (read unverified, for display only), escaped like any text from the
// cluster, and kubectl is given the token.
func TestWhatTheClusterSeesThroughAProxyToken(t *testing.T) {
	h := newHarness(t)
	key, err := proxytoken.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	e := h.engine(&out)
	var issued string
	e.Exchange = func(context.Context, *config.Concierge, string) (*loginv1alpha1.ClusterCredential, error) {
		token, exp, _, err := proxytoken.Sign(key, proxytoken.ForInstall("install-1"), &user.DefaultInfo{Name: "oidc:alice", Groups: []string{"oidc:devs", "oidc:ops" + hostile}}, time.Minute, h.clk.now())
		issued = token
		return &loginv1alpha1.ClusterCredential{Token: token, ExpirationTimestamp: metav1.NewTime(exp)}, err
	}
	if err := e.LoginOIDC(context.Background(), h.request(true), interactive); err != nil {
		t.Fatal(err)
	}
	const escaped = `\x1b[2J\x0d\u009b31m`
	if s := h.ui.summary.Load(); s == nil || s.Username != "oidc:alice" || !slices.Equal(s.Groups, []string{"oidc:devs", "oidc:ops" + escaped}) {
		t.Fatalf("summary %+v", s)
	}
	status, _ := decode(t, out.Bytes())["status"].(map[string]any)
	if status["token"] != issued || status["clientCertificateData"] != nil {
		t.Fatalf("kubectl was given %v", status)
	}
}

// hostile would clear the screen, return to the line's start and open a
// CSI with the C1 byte, were it printed as it came.
const hostile = "\x1b[2J\r\u009b31m"

// TestShownIdentityIsEscaped: the username and groups the login shows
// (here from the cluster's certificate) and the provider name a Supervisor
// lists reach the view with their control characters escaped.
func TestShownIdentityIsEscaped(t *testing.T) {
	h := newHarness(t)
	ca, err := certauthority.New("cluster", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := h.engine(io.Discard)
	e.Exchange = func(context.Context, *config.Concierge, string) (*loginv1alpha1.ClusterCredential, error) {
		issued, err := ca.IssueClientCert("alice"+hostile, "", []string{"devs" + hostile}, time.Minute)
		if err != nil {
			return nil, err
		}
		return &loginv1alpha1.ClusterCredential{ClientCertificateData: string(issued.CertPEM), ClientKeyData: string(issued.KeyPEM),
			ExpirationTimestamp: metav1.NewTime(issued.NotAfter)}, nil
	}
	if err := e.LoginOIDC(context.Background(), h.request(true), interactive); err != nil {
		t.Fatal(err)
	}
	const escaped = `\x1b[2J\x0d\u009b31m`
	if s := h.ui.summary.Load(); s == nil || s.Username != "alice"+escaped || !slices.Equal(s.Groups, []string{"devs" + escaped}) {
		t.Fatalf("summary %+v", s)
	}

	h = supervisorHarness(t)
	h.idp.IDPs[0].Name = "My LDAP" + hostile
	r := h.request(true)
	r.Upstream = config.Upstream{Name: "My LDAP" + hostile, Type: "ldap", Flow: config.UpstreamFlowPassword}
	r.Username, r.Password = "bob", "bob-password"
	if err := h.engine(io.Discard).LoginOIDC(context.Background(), r, nonInteractive); err != nil {
		t.Fatal(err)
	}
	h.ui.mu.Lock()
	steps := strings.Join(h.ui.steps, "\n")
	h.ui.mu.Unlock()
	if strings.ContainsAny(steps, "\x1b\r\u009b") || !strings.Contains(steps, "Log in to My LDAP"+escaped) {
		t.Fatalf("steps %q", steps)
	}
}

func decodeSegment(t *testing.T, seg string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSessionRecordsItsIssuer: a saved session records its login's issuer,
// client ID and CA (never the client secret), after a login and after a
// refresh, which also fills them in for a session cached without them:
// `pinniped logout --all` revokes sessions with them.
func TestSessionRecordsItsIssuer(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	r := h.request(false)
	r.ClientSecret = "s3cret"
	h.idp.ClientSecret = "s3cret"
	cache := &sessions.Cache{Store: h.store}
	check := func(when string) {
		t.Helper()
		s, err := cache.Load(ctx, r.SessionKey())
		if err != nil || s == nil || s.Issuer == nil {
			t.Fatalf("%s: the session (found: %v) records no issuer", when, s != nil)
		}
		want := sessions.Issuer{URL: h.idp.URL, ClientID: h.idp.ClientID, CABundle: h.idp.CABundle, HasClientSecret: true}
		if s.Issuer.URL != want.URL || s.Issuer.ClientID != want.ClientID || !bytes.Equal(s.Issuer.CABundle, want.CABundle) || !s.Issuer.HasClientSecret {
			t.Fatalf("%s: the session records %+v, want %+v", when, s.Issuer, want)
		}
	}
	e := h.engine(io.Discard)
	e.Discover = func(ctx context.Context) (login.Provider, error) { return oidclogin.Discover(ctx, r, h.clk.now) }
	if err := e.LoginOIDC(ctx, r, interactive); err != nil {
		t.Fatal(err)
	}
	check("after a login")
	raw, err := h.store.Get(ctx, r.SessionKey())
	if err != nil || bytes.Contains(raw, []byte("s3cret")) {
		t.Fatalf("the session holds the client secret (or cannot be read: %v)", err)
	}
	older, err := cache.Load(ctx, r.SessionKey())
	if err != nil || older == nil {
		t.Fatalf("the session: %v", err)
	}
	older.Issuer = nil
	if err := cache.Put(ctx, r.SessionKey(), older); err != nil {
		t.Fatal(err)
	}
	h.clk.add(2 * time.Hour)
	if err := e.LoginOIDC(ctx, r, interactive); err != nil {
		t.Fatal(err)
	}
	if h.idp.RefreshGrants.Load() != 1 {
		t.Fatalf("refresh grants %d, want 1", h.idp.RefreshGrants.Load())
	}
	check("after a refresh")
}

// TestCacheBreakingPrivacyIsRefused: a cache directory others may enter
// is refused with the fix, before any login: logging in again would
// write over what is there, and the person would never learn why.
func TestCacheBreakingPrivacyIsRefused(t *testing.T) {
	h := newHarness(t)
	r := h.request(true)
	if err := h.engine(io.Discard).LoginOIDC(context.Background(), r, interactive); err != nil {
		t.Fatal(err)
	}
	grants := h.idp.AuthCodeGrants.Load()
	if err := os.Chmod(h.store.Dir, 0o755); err != nil { //nolint:gosec // the loose mode under test
		t.Fatal(err)
	}
	h.clk.add(2 * time.Hour) // nothing cached is usable: a login would follow
	err := h.engine(io.Discard).LoginOIDC(context.Background(), r, interactive)
	if err == nil || !strings.Contains(err.Error(), "chmod 700 "+h.store.Dir) {
		t.Fatalf("a 0755 cache: %v, want a refusal naming chmod 700", err)
	}
	if h.idp.AuthCodeGrants.Load() != grants || h.idp.RefreshGrants.Load() != 0 {
		t.Error("logged in over a cache that breaks the rule")
	}
	if info, _ := os.Stat(h.store.Dir); info.Mode().Perm() != 0o755 {
		t.Errorf("the directory was changed to %v behind the person's back", info.Mode().Perm())
	}
}

// TestSessionLinkIsRefused: a link planted under a session's name is
// refused with the fix, not taken for no session and logged in over.
func TestSessionLinkIsRefused(t *testing.T) {
	h := newHarness(t)
	r := h.request(false)
	if err := h.engine(io.Discard).LoginOIDC(context.Background(), r, interactive); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(h.store.Dir)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	linked := 0
	for _, e := range entries {
		name := filepath.Join(h.store.Dir, e.Name())
		if b, _ := os.ReadFile(name); bytes.Contains(b, []byte("refresh")) { //nolint:gosec // the test's own cache
			if err := os.Remove(name); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, name); err != nil {
				t.Fatal(err)
			}
			linked++
		}
	}
	if linked != 1 {
		t.Fatalf("%d session files", linked)
	}
	grants := h.idp.AuthCodeGrants.Load()
	h.clk.add(2 * time.Hour) // the cached credential has expired: the session is read
	err = h.engine(io.Discard).LoginOIDC(context.Background(), r, interactive)
	if err == nil || !strings.Contains(err.Error(), "is a link") {
		t.Fatalf("a linked session: %v, want a refusal", err)
	}
	if h.idp.AuthCodeGrants.Load() != grants {
		t.Error("logged in over a linked session")
	}
}
