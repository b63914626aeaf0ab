package doctor

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

// TestIssuerWithoutTLS: an issuer that is not https, or whose answer
// comes without TLS (a redirect to http), is never reported trusted.
func TestIssuerWithoutTLS(t *testing.T) {
	b := newBed(t)
	plain := httptest.NewServer(b.idp)
	t.Cleanup(plain.Close)
	b.args = replaceArg(b.args, "--issuer=", plain.URL)
	r := b.report()
	// The login model refuses it, so it is never probed.
	want(t, r, "exec.args", Fail, "must be an https URL")
	want(t, r, "issuer.tls", Skip, "validate (exec.args)")
	// Were it let through, the probe itself refuses it before any request.
	walk := &run{d: &Doctor{f: &cmdutil.Factory{Now: time.Now, HTTPClient: func([]byte, time.Duration) (*http.Client, error) { return http.DefaultClient, nil }}}}
	facts := &issuerFacts{clusterFacts: &clusterFacts{cacheFacts: &cacheFacts{execFacts: &execFacts{
		contextFacts: &contextFacts{run: walk}, oidc: &config.OIDC{Issuer: plain.URL}}}}}
	if res := checkIssuerTLS(t.Context(), facts); res.Status != Fail || !strings.Contains(res.Fix, "not served over https") {
		t.Errorf("a plain-http issuer: %+v", res)
	}
	if facts.issuer.status != 0 {
		t.Errorf("the plain-http issuer was asked (HTTP %d)", facts.issuer.status)
	}

	b = newBed(t)
	redirect, ca := shortLived(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, plain.URL+req.URL.Path, http.StatusFound)
	}), 30*24*time.Hour)
	b.moveIDP(redirect, ca)
	want(t, b.report(), "issuer.tls", Fail, "not served over https", "--issuer")
}

// TestRefusedLoginIsNotProbed: arguments that parse but do not validate
// are not used by the later checks.
func TestRefusedLoginIsNotProbed(t *testing.T) {
	b := newBed(t)
	b.args = append(b.args, "--flow=carrier-pigeon")
	r := b.report()
	want(t, r, "exec.args", Fail, "carrier-pigeon")
	for _, name := range []string{"cache.backend", "cache.credential", "issuer.tls", "clock.issuer", "agent.api", "agent.apiservice"} {
		want(t, r, name, Skip, "needs login arguments that validate (exec.args)")
	}
	for _, req := range b.api.requests {
		if req != "GET /version" {
			t.Errorf("the cluster was asked %s", req)
		}
	}
}

// TestControlCharactersAreVisible: a server's message cannot drive the
// terminal, or reorder what it shows, through the text or JSON output.
func TestControlCharactersAreVisible(t *testing.T) {
	b := newBed(t)
	b.api.authPhase = "Error"
	b.api.authConditions = []map[string]any{{"type": "Ready", "status": "False", "reason": "X", "message": "boom \x1b]0;x\x07\x1b[2J\u009b\u202e done", "lastTransitionTime": "2026-11-25T00:00:00Z"}}
	out, _ := b.run()
	if strings.ContainsAny(out, "\x1b\x07\u009b\u202e") {
		t.Errorf("raw control characters in the text output: %q", out)
	}
	if !strings.Contains(out, `boom \x1b]0;x\x07\x1b[2J\u009b\u202e done`) {
		t.Errorf("the message is not shown escaped:\n%s", out)
	}
	if got := oneLine("a\x7fb\x00c"); got != `a\x7fb\x00c` {
		t.Errorf("oneLine: %q", got)
	}
	// In JSON too, and the message reads back the same.
	js, _ := b.run("-o", "json")
	if strings.ContainsAny(js, "\x1b\x07\u009b\u202e") {
		t.Errorf("raw control characters in the JSON output: %q", js)
	}
	var r Report
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Checks {
		if c.Name == "agent.authenticator" && !strings.Contains(c.Detail+c.Fix, "boom \x1b]0;x\x07\x1b[2J\u009b\u202e done") {
			t.Errorf("the JSON does not read back the message: %+v", c)
		}
	}
}

// authenticated: requests other than the anonymous /version and the junk
// TokenCredentialRequest.
func authenticated(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if r != "GET /version" && !strings.HasSuffix(r, "/tokencredentialrequests") {
			out = append(out, r)
		}
	}
	return out
}

// TestUnverifiedClusterGetsNoCredential: with insecure-skip-tls-verify the
// cluster is asked anonymously only, and cluster.api says what to fix;
// a plain-http server is not asked at all.
func TestUnverifiedClusterGetsNoCredential(t *testing.T) {
	b := newBed(t)
	b.insecure = true
	r := b.report()
	want(t, r, "cluster.api", Warn, "insecure-skip-tls-verify", "certificate-authority-data")
	for _, name := range []string{"you.identity", "you.permissions", "agent.apiservice", "agent.authenticator"} {
		want(t, r, name, Skip, "no credential is sent to it (cluster.api)")
	}
	if got := authenticated(b.api.requests); len(got) > 0 {
		t.Errorf("the credential went to an unverified cluster: %v", got)
	}

	// The kubeconfig's own token is not sent either.
	b = newBed(t)
	b.insecure = true
	b.user = &clientcmdapi.AuthInfo{Token: b.api.token}
	want(t, b.report(), "you.identity", Skip, "cluster.api")
	if got := authenticated(b.api.requests); len(got) > 0 {
		t.Errorf("the kubeconfig's token went to an unverified cluster: %v", got)
	}

	b = newBed(t)
	plain := httptest.NewServer(b.api)
	t.Cleanup(plain.Close)
	b.server = plain.URL
	r = b.report()
	want(t, r, "cluster.api", Fail, "plain http", "https address")
	want(t, r, "you.identity", Skip, "plain http")
	if got := authenticated(b.api.requests); len(got) > 0 {
		t.Errorf("the credential went over http: %v", got)
	}
}

// TestUnreachableClusterIsAskedOnce: the checks that need the cluster
// skip, naming cluster.api, instead of each waiting out the timeout.
func TestUnreachableClusterIsAskedOnce(t *testing.T) {
	// Accepts, never answers: each request would take the whole timeout.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	b := newBed(t)
	b.server = "https://" + ln.Addr().String()
	b.args = replaceArg(b.args, "--concierge-endpoint=", b.server)
	start := time.Now()
	out, _ := b.run("-o", "json", "--timeout=1s")
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("doctor took %s", took)
	}
	r := b.reportFrom(out)
	// The agent's endpoint is the cluster's server, which may be the
	// impersonation proxy: if so, its silence is the agent's.
	want(t, r, "cluster.api", Fail, "does not answer", "if it is the agent's impersonation proxy", "the agent may be down")
	want(t, r, "agent.api", Skip, "the agent's endpoint is the cluster's server, which did not answer (cluster.api)")
	for _, name := range []string{"agent.apiservice", "agent.credentialissuer", "agent.authenticator", "you.identity", "you.permissions"} {
		want(t, r, name, Skip, "could not be reached (cluster.api)")
	}
}

// TestUnreachableClusterBesideTheAgent: the agent's endpoint elsewhere is
// still asked, and cluster.api does not guess at the proxy.
func TestUnreachableClusterBesideTheAgent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // refused from now on
	b := newBed(t)
	b.server = "https://" + addr
	r := b.report("--timeout=2s")
	want(t, r, "cluster.api", Fail, "does not answer", "check the server address")
	if c := r.Check("cluster.api"); strings.Contains(c.Fix, "impersonation proxy") {
		t.Errorf("cluster.api guesses at the proxy with the agent elsewhere: %s", c.Fix)
	}
	want(t, r, "agent.api", OK, "refused a junk token")
}

// TestUntrustedClusterStillProbesTheAgent: a cluster certificate the
// kubeconfig does not trust says nothing of the agent's, which has its own
// CA bundle; only a silent server is not asked twice.
func TestUntrustedClusterStillProbesTheAgent(t *testing.T) {
	b := newBed(t)
	b.clusterCA = otherCA(t)
	r := b.report()
	want(t, r, "cluster.api", Fail, "does not trust")
	want(t, r, "agent.api", OK, "refused a junk token")
	want(t, r, "you.identity", Skip, "TLS connection could not be used (cluster.api)")
}

// TestUnverifiedAdminKubeconfigGetsNoCredential: an administrator's
// credential is not sent where the login's would not be.
func TestUnverifiedAdminKubeconfigGetsNoCredential(t *testing.T) {
	// A plain-http server that records what reaches it.
	var mu sync.Mutex
	var plain []string
	recorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		plain = append(plain, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(recorder.Close)
	for name, tc := range map[string]struct {
		edit     func(c *clientcmdapi.Cluster)
		why, fix string
	}{
		"insecure-skip-tls-verify": {func(c *clientcmdapi.Cluster) { c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil },
			"turns off certificate checks", "remove insecure-skip-tls-verify"},
		"plain http": {func(c *clientcmdapi.Cluster) { c.Server, c.CertificateAuthorityData = recorder.URL, nil },
			"names no https:// server", "https:// address"},
		"no scheme (plain http to client-go)": {func(c *clientcmdapi.Cluster) {
			c.Server, c.CertificateAuthorityData = strings.TrimPrefix(recorder.URL, "http://"), nil
		}, "names no https:// server", "https:// address"},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t)
			path := b.adminKubeconfig()
			cfg, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(cfg.Clusters["c"])
			if err := clientcmd.WriteToFile(*cfg, path); err != nil {
				t.Fatal(err)
			}
			r := b.report("--admin-kubeconfig=" + path)
			for _, c := range []string{"agent.apiservice", "agent.credentialissuer", "agent.authenticator"} {
				want(t, r, c, Skip, "--admin-kubeconfig's current context", tc.why, "does not send its credential", tc.fix)
			}
			for _, req := range b.api.adminRequests {
				t.Errorf("the admin's credential was sent: %s", req)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, req := range plain {
				t.Errorf("doctor asked the plain-http server: %s", req)
			}
		})
	}
}

func (b *bed) reportFrom(out string) *Report {
	b.t.Helper()
	var r Report
	if err := jsonUnmarshal(out, &r); err != nil {
		b.t.Fatalf("%v\n%s", err, out)
	}
	return &r
}

// TestAdminKubeconfigOfAnotherCluster: its answers would be about another
// agent; and its own secrets are never printed.
func TestAdminKubeconfigOfAnotherCluster(t *testing.T) {
	b := newBed(t)
	path := b.adminKubeconfig()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Clusters["c"].Server = b.idp.srv.URL
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	r := b.report("--admin-kubeconfig=" + path)
	want(t, r, "agent.apiservice", Fail, "--admin-kubeconfig's current context is the cluster at "+b.idp.srv.URL, "this context's server")
	want(t, r, "agent.credentialissuer", Fail, "this context's server")

	// Another cluster whose agent answers, and advertises only itself.
	other := newAPIServer(t, b.idp.srv.URL)
	cfg.Clusters["c"].Server = other.srv.URL
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	want(t, b.report("--admin-kubeconfig="+path), "agent.authenticator", Fail, "its agent does not advertise this context's server "+b.api.srv.URL)

	// A kubeconfig made for the impersonation proxy names the proxy: the
	// admin's (the API server's) agent advertising it is the same cluster.
	b = newBed(t)
	proxy, proxyCA := shortLived(t, b.api, 30*24*time.Hour)
	b.server, b.clusterCA = proxy.URL, proxyCA
	b.api.strategies = append(b.api.strategies, map[string]any{"type": "ImpersonationProxy", "status": "Success", "reason": "Listening",
		"message": "listening", "lastUpdateTime": "2026-11-25T00:00:00Z", "frontend": map[string]any{"type": "ImpersonationProxy",
			"impersonationProxyInfo": map[string]any{"endpoint": proxy.URL, "certificateAuthorityData": base64.StdEncoding.EncodeToString(proxyCA)}}})
	r = b.report("--admin-kubeconfig=" + b.adminKubeconfig())
	want(t, r, "agent.apiservice", OK)
	want(t, r, "agent.credentialissuer", OK)

	// Its token, forced into an error message, is redacted.
	b = newBed(t)
	b.tweak = func(d *Doctor) {
		d.f.DynamicFor = func(cfg *rest.Config) (dynamic.Interface, error) {
			return nil, fmt.Errorf("no client for token %q", cfg.BearerToken)
		}
	}
	out, _ := b.run("-o", "json", "--admin-kubeconfig="+b.adminKubeconfig())
	if strings.Contains(out, adminToken) || !strings.Contains(out, "[redacted]") {
		t.Errorf("the admin's token:\n%s", out)
	}
}

// TestCorruptCacheEntryIsLeftAlone: doctor reports it, and writes or
// deletes nothing in the cache directory.
func TestCorruptCacheEntryIsLeftAlone(t *testing.T) {
	b := newBed(t)
	dir := filepath.Join(b.env["XDG_CONFIG_HOME"], "pinniped")
	var before map[string]string
	b.tweak = func(d *Doctor) {
		// The login's entry is made unreadable, the index left.
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if data, _ := os.ReadFile(p); bytes.Contains(data, []byte(`"credential"`)) { //nolint:gosec // the test's own directory
					_ = os.WriteFile(p, []byte("{{{"), 0o600)
				}
			}
			return nil
		})
		before = snapshot(t, dir)
		d.f.Caches = readOnlyCaches{d.f.Caches, t}
	}
	r := b.report()
	want(t, r, "cache.credential", Warn, "unreadable", "pinniped logout")
	if after := snapshot(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the cache directory changed:\n%v\n%v", before, after)
	}
	if !strings.Contains(fmt.Sprint(before), "{{{") {
		t.Fatalf("no entry was corrupted: %v", before)
	}
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // a missing directory is an empty snapshot
		}
		info, _ := d.Info()
		data := []byte{}
		if !d.IsDir() {
			data, _ = os.ReadFile(p) //nolint:gosec // the test's own directory
		}
		out[p] = fmt.Sprintf("%s %s %d", info.ModTime().Format(time.RFC3339Nano), data, info.Size())
		return nil
	})
	return out
}

// TestCheckEdgeCases: one case each of checks meeting an unusual cluster
// or login.
func TestCheckEdgeCases(t *testing.T) {
	t.Run("an incomplete rules review is a lower bound", func(t *testing.T) {
		b := newBed(t)
		b.api.incomplete = true
		b.api.rules = b.api.rules[:1]
		want(t, b.report(), "you.permissions", OK, "cannot list rules", "lower bound")
	})
	t.Run("an authenticator without status yet", func(t *testing.T) {
		b := newBed(t)
		b.api.authPhase = ""
		want(t, b.report(), "agent.authenticator", Warn, "has not reported", "agent's logs")
	})
	t.Run("an authenticator Pending without conditions", func(t *testing.T) {
		b := newBed(t)
		b.api.authPhase = "Pending"
		r := b.report()
		want(t, r, "agent.authenticator", Fail, `JWTAuthenticator "dex" is Pending: ask`)
	})
	t.Run("the issuer's clock alone is off", func(t *testing.T) {
		b := newBed(t)
		b.idp.skew = time.Minute
		r := b.report()
		want(t, r, "clock.issuer", Warn, "provider's administrator", "issuer's clock")
		if c := r.Check("clock.issuer"); strings.Contains(c.Fix, "set this machine's clock") {
			t.Errorf("blames this machine: %s", c.Fix)
		}
	})
	t.Run("a provider refusing with its own error page", func(t *testing.T) {
		b := newBed(t)
		b.idp.authorize = func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/error?error=invalid_request&error_description=bad+redirect_uri", http.StatusFound)
		}
		want(t, b.report(), "issuer.client", Fail, "invalid_request: bad redirect_uri")
	})
	t.Run("a provider answering 200", func(t *testing.T) {
		b := newBed(t)
		b.idp.authorize = func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>sign in</html>")) }
		want(t, b.report(), "issuer.client", OK, "did not refuse", "cannot be told apart")
	})
	t.Run("a server not speaking TLS", func(t *testing.T) {
		b := newBed(t)
		plain := httptest.NewServer(b.api)
		t.Cleanup(plain.Close)
		b.server = strings.Replace(plain.URL, "http://", "https://", 1)
		want(t, b.report(), "cluster.api", Fail, "does not speak TLS")
	})
	t.Run("an unreadable advertised proxy CA", func(t *testing.T) {
		b := newBed(t)
		b.api.strategies = append(b.api.strategies, map[string]any{"type": "ImpersonationProxy", "status": "Success", "reason": "Listening",
			"message": "listening", "lastUpdateTime": "2026-11-25T00:00:00Z", "frontend": map[string]any{"type": "ImpersonationProxy",
				"impersonationProxyInfo": map[string]any{"endpoint": b.api.srv.URL, "certificateAuthorityData": base64.StdEncoding.EncodeToString([]byte("not PEM"))}}})
		want(t, b.report(), "agent.proxy", Fail, "unreadable")
	})
	t.Run("proxy endpoints", func(t *testing.T) {
		for endpoint, wantAddr := range map[string]string{
			"https://[fd00::1]":      "[fd00::1]:443",
			"https://[fd00::1]:8443": "[fd00::1]:8443",
			"[fd00::1]":              "[fd00::1]:443",
			"proxy.example.com":      "proxy.example.com:443",
			"https://10.0.0.1:6443/": "10.0.0.1:6443",
		} {
			name, addr, err := dialAddress(endpoint)
			if err != nil || addr != wantAddr || strings.ContainsAny(name, "[]") {
				t.Errorf("%s: %q %q %v", endpoint, name, addr, err)
			}
		}
	})
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// readOnlyCaches fails the test when doctor opens the login's combined
// store: on a keyring timeout it writes a marker file.
type readOnlyCaches struct {
	cmdutil.Caches
	t *testing.T
}

func (c readOnlyCaches) Open(mode string, warn io.Writer) (cache.Store, error) {
	c.t.Errorf("doctor opened the login's store for %q", mode)
	return c.Caches.Open(mode, warn)
}

// TestSchemelessClusterGetsNoCredential: a kubeconfig server given as
// host:port with no CA is plain http to client-go, so the login's cached
// credential must not reach it, as with an http:// server.
func TestSchemelessClusterGetsNoCredential(t *testing.T) {
	b := newBed(t)
	var mu sync.Mutex
	var sent []string
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			sent = append(sent, r.Method+" "+r.URL.Path)
		}
		mu.Unlock()
		b.api.ServeHTTP(w, r)
	}))
	t.Cleanup(plain.Close)
	b.server = strings.TrimPrefix(plain.URL, "http://")
	b.clusterCA = []byte{} // no CA: client-go picks http for a bare host:port
	r := b.report()
	want(t, r, "cluster.api", Fail, "plain http", "https address")
	want(t, r, "you.identity", Skip, "plain http")
	mu.Lock()
	defer mu.Unlock()
	if len(sent) > 0 {
		t.Errorf("the cached credential went over plain http: %v", sent)
	}
}
