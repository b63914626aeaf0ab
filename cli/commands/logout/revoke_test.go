package logout

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	xhtml "golang.org/x/net/html"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/keyringstore"
	"github.com/pinniped-kit/pinniped/cache/lock"
	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin/oidctest"
)

// request is what the test issuer's endpoints received.
type request struct {
	Path, Method, ContentType, RawQuery, Authorization string
	Form                                               url.Values
}

// testIssuer is an OIDC issuer over TLS: discovery, and the revocation and
// end-session endpoints when set, recording what reaches them.
type testIssuer struct {
	URL string
	CA  []byte
	// ClientID is what its logins use.
	ClientID string
	srv      *httptest.Server

	// RevocationEndpoint and EndSessionEndpoint are advertised when set
	// ("/revoke" and "/end_session" are served).
	RevocationEndpoint, EndSessionEndpoint string
	// Supervisor makes discovery a Pinniped Supervisor's.
	Supervisor bool
	// RevokeStatus and RevokeBody answer revocations (default 200, empty).
	RevokeStatus int
	RevokeBody   string
	// RevokeLocation is sent as the revocation answer's Location.
	RevokeLocation string

	mu       sync.Mutex
	requests []request
}

func newTestIssuer(t *testing.T) *testIssuer {
	return newTestIssuerWith(t, "pinniped-cli", nil)
}

// newTestIssuerWith is a testIssuer whose logins use clientID; with ca,
// its serving certificate is ca's (otherwise httptest's own, which every
// httptest server shares).
func newTestIssuerWith(t *testing.T, clientID string, ca *certauthority.CA) *testIssuer {
	ti := &testIssuer{ClientID: clientID}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		ti.mu.Lock()
		defer ti.mu.Unlock()
		doc := map[string]any{"issuer": ti.URL, "authorization_endpoint": ti.URL + "/auth", "token_endpoint": ti.URL + "/token", "jwks_uri": ti.URL + "/keys"}
		if ti.RevocationEndpoint != "" {
			doc["revocation_endpoint"] = ti.RevocationEndpoint
		}
		if ti.EndSessionEndpoint != "" {
			doc["end_session_endpoint"] = ti.EndSessionEndpoint
		}
		if ti.Supervisor {
			doc["discovery.supervisor.pinniped.dev/v1alpha1"] = map[string]any{"pinniped_identity_providers_endpoint": ti.URL + "/v1alpha1/pinniped_identity_providers"}
		}
		_ = json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("/revoke", func(w http.ResponseWriter, r *http.Request) {
		ti.record(r)
		ti.mu.Lock()
		status, body := ti.RevokeStatus, ti.RevokeBody
		if ti.RevokeLocation != "" {
			w.Header().Set("Location", ti.RevokeLocation)
		}
		ti.mu.Unlock()
		if status == 0 {
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})
	ti.srv = httptest.NewUnstartedServer(mux)
	if ca != nil {
		issued, err := ca.IssueServingCert("test issuer", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		ti.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ti.srv.StartTLS()
	t.Cleanup(ti.srv.Close)
	ti.URL = ti.srv.URL
	ti.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ti.srv.Certificate().Raw})
	if ca != nil {
		ti.CA = ca.CertPEM()
	}
	return ti
}

func (ti *testIssuer) record(r *http.Request) {
	_ = r.ParseForm()
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.requests = append(ti.requests, request{r.URL.Path, r.Method, r.Header.Get("Content-Type"), r.URL.RawQuery, r.Header.Get("Authorization"), r.PostForm})
}

func (ti *testIssuer) received() []request {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return append([]request(nil), ti.requests...)
}

// args are a kubeconfig's login arguments for this issuer.
func (ti *testIssuer) args(extra ...string) []string {
	return append([]string{"login", "oidc", "--issuer=" + ti.URL, "--client-id=" + ti.ClientID,
		"--ca-bundle-data=" + base64.StdEncoding.EncodeToString(ti.CA)}, extra...)
}

// session is a cached session whose tokens are easy to find in any output.
func session() *sessions.Tokens {
	return &sessions.Tokens{IDToken: "ID-TOKEN-xyz", IDTokenExpiry: time.Now().Add(time.Hour),
		AccessToken: "ACCESS-TOKEN-xyz", RefreshToken: "REFRESH-TOKEN-xyz"}
}

// cacheSession caches a credential and t in st under the keys of the
// login of args, t recording its issuer as a login of today does.
func cacheSession(t *testing.T, st cache.Store, args []string, t0 *sessions.Tokens) {
	t.Helper()
	c, err := flagset.ParseOIDC(args[2:], func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cred := credcache.Credential{Token: "t", ExpirationTimestamp: time.Now().Add(time.Hour)}
	if err := (&credcache.Cache{Now: time.Now, Store: st}).Put(ctx, c.CredentialKey(config.Cluster{Server: "https://10.0.0.1:6443"}), "label", cred); err != nil {
		t.Fatal(err)
	}
	if t0.Issuer == nil {
		t0.Issuer = &sessions.Issuer{URL: c.Issuer, ClientID: c.ClientID, CABundle: c.CABundle, HasClientSecret: c.ClientSecret != ""}
	}
	if err := (&sessions.Cache{Store: st}).Put(ctx, c.SessionKey(), t0); err != nil {
		t.Fatal(err)
	}
}

// runLogout runs `pinniped logout args` with browser as the opener (nil:
// none can be opened).
func runLogout(t *testing.T, browser func(string) error, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	f := cmdutil.Test(nil, &out, &out, nil)
	f.Now = time.Now
	f.Caches = testCaches
	if browser != nil {
		f.Browser = browser
	}
	cmd := NewCmdLogout(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// noTokenIn fails when a token of session() shows in s.
func noTokenIn(t *testing.T, s string) {
	t.Helper()
	if strings.Contains(s, "TOKEN-xyz") {
		t.Errorf("a token was printed:\n%s", s)
	}
}

// TestLogoutRevokesAtTheIssuer: the refresh token, then the access token,
// are each POSTed once (the keyring and the file copies are one session)
// to the revocation endpoint as RFC 7009 has it: a form body with the
// token, its type hint and the public client's client_id, nothing in the
// URL; a login with a client secret sends it as its login does.
func TestLogoutRevokesAtTheIssuer(t *testing.T) {
	for name, extra := range map[string][]string{"public client": nil, "client secret": {"--client-secret=s3cret"}} {
		t.Run(name, func(t *testing.T) {
			ti := newTestIssuer(t)
			ti.RevocationEndpoint = ti.URL + "/revoke"
			args := ti.args(extra...)
			kr, files, kubeconfig := setup(t, args, nil)
			cacheSession(t, kr, args, session())
			cacheSession(t, files, args, session())
			out, err := runLogout(t, nil, "--kubeconfig="+kubeconfig)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			empty(t, kr, files)
			noTokenIn(t, out)
			got := ti.received()
			if len(got) != 2 {
				t.Fatalf("%d revocations, want 2 (refresh, access): %+v\n%s", len(got), got, out)
			}
			for i, want := range []struct{ token, hint string }{{"REFRESH-TOKEN-xyz", "refresh_token"}, {"ACCESS-TOKEN-xyz", "access_token"}} {
				r := got[i]
				form := url.Values{"token": {want.token}, "token_type_hint": {want.hint}, "client_id": {"pinniped-cli"}}
				if extra != nil {
					form.Set("client_secret", "s3cret")
				}
				if r.Method != http.MethodPost || r.ContentType != "application/x-www-form-urlencoded" || r.RawQuery != "" || r.Authorization != "" || r.Form.Encode() != form.Encode() {
					t.Errorf("revocation %d: %+v, want a POST of the form %v", i, r, form)
				}
			}
			if !strings.Contains(out, "Revoked the session's refresh token at "+ti.URL) || !strings.Contains(out, "Logged out of c") {
				t.Errorf("said:\n%s", out)
			}
		})
	}
}

// TestLogoutWithoutRevocationEndpoint: a Pinniped Supervisor advertises no
// revocation endpoint: logout says the refresh token stays valid there,
// removes the local copies, and succeeds.
func TestLogoutWithoutRevocationEndpoint(t *testing.T) {
	ti := newTestIssuer(t)
	ti.Supervisor = true
	args := ti.args("--upstream-identity-provider-name=LDAP", "--upstream-identity-provider-type=ldap", "--upstream-identity-provider-flow=cli_password", "--request-audience=cluster-1")
	kr, files, kubeconfig := setup(t, args, map[string]string{"PINNIPED_USERNAME": ""})
	cacheSession(t, kr, args, session())
	out, err := runLogout(t, nil, "--kubeconfig="+kubeconfig)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	empty(t, kr, files)
	noTokenIn(t, out)
	if !strings.Contains(out, "the issuer has no revocation endpoint: the refresh token stays valid there until it expires; the local copies were removed") {
		t.Errorf("said:\n%s", out)
	}
}

// TestLogoutWhenRevocationFails: an error answer, an unreachable issuer,
// and a revocation endpoint over plain http or redirecting there (which
// must receive nothing: the body is the refresh token) each leave no local
// copy behind, are reported, and fail the command.
func TestLogoutWhenRevocationFails(t *testing.T) {
	plain := newRecorder(t)
	for name, tc := range map[string]struct {
		prepare func(*testIssuer)
		says    string
	}{
		"HTTP 500": {func(ti *testIssuer) {
			ti.RevocationEndpoint, ti.RevokeStatus, ti.RevokeBody = ti.URL+"/revoke", 500, `{"error":"server_error","error_description":"REFRESH-TOKEN-xyz \u001b[31m"}`
		}, "answered HTTP 500 (server_error)"},
		"unreachable": {func(ti *testIssuer) { ti.srv.Close() }, "could not read the issuer's discovery document"},
		"plain http":  {func(ti *testIssuer) { ti.RevocationEndpoint = plain.URL + "/revoke" }, "must be an https URL"},
		"redirect to plain http": {func(ti *testIssuer) {
			ti.RevocationEndpoint, ti.RevokeStatus, ti.RevokeLocation = ti.URL+"/revoke", http.StatusTemporaryRedirect, plain.URL+"/revoke"
		}, "answered HTTP 307"},
	} {
		t.Run(name, func(t *testing.T) {
			ti := newTestIssuer(t)
			tc.prepare(ti)
			args := ti.args()
			kr, files, kubeconfig := setup(t, args, nil)
			cacheSession(t, kr, args, session())
			cacheSession(t, files, args, session())
			out, err := runLogout(t, nil, "--kubeconfig="+kubeconfig)
			if err == nil || !strings.Contains(err.Error(), "the local copies were removed") {
				t.Fatalf("logout succeeded or said %v:\n%s", err, out)
			}
			empty(t, kr, files)
			noTokenIn(t, out+err.Error())
			if !strings.Contains(out, tc.says) || !strings.Contains(out, "stays valid there until it expires; the local copies were removed") {
				t.Errorf("said:\n%s", out)
			}
		})
	}
	if n := plain.count(); n != 0 {
		t.Fatalf("the plain-http revocation endpoint received %d requests", n)
	}
}

// recorder is a plain-http server counting what reaches it.
type recorder struct {
	URL string
	mu  sync.Mutex
	n   int
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { r.mu.Lock(); r.n++; r.mu.Unlock() }))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *recorder) count() int { r.mu.Lock(); defer r.mu.Unlock(); return r.n }

// TestLogoutAllRevokesEachSession: --all revokes every session with what
// it recorded of its login: each issuer receives its own sessions' tokens
// with their own client ID, reached through the CA that session's login
// trusted (issuer b's certificate is of a CA of its own, which issuer a's
// does not verify); a session cached before sessions recorded that is
// removed and said not to be revoked.
func TestLogoutAllRevokesEachSession(t *testing.T) {
	caB, err := certauthority.New("issuer b's CA", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := newTestIssuer(t), newTestIssuerWith(t, "client-of-b", caB)
	a.RevocationEndpoint, b.RevocationEndpoint = a.URL+"/revoke", b.URL+"/revoke"
	// Each CA verifies only its own issuer: a revocation that reached b
	// went through b's CA.
	for _, c := range []struct {
		ca   []byte
		srv  *httptest.Server
		want bool
	}{{a.CA, a.srv, true}, {a.CA, b.srv, false}, {b.CA, b.srv, true}, {b.CA, a.srv, false}} {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(c.ca)
		_, err := c.srv.Certificate().Verify(x509.VerifyOptions{Roots: pool})
		if (err == nil) != c.want {
			t.Fatalf("the test's CAs do not each verify only their own issuer: %v", err)
		}
	}
	kr, files, _ := setup(t, a.args(), nil)
	cacheSession(t, kr, a.args(), session())
	sb := session()
	sb.RefreshToken, sb.AccessToken = "REFRESH-TOKEN-xyz-b", ""
	cacheSession(t, files, b.args(), sb)
	older := session()
	older.Issuer = nil
	older.RefreshToken, older.AccessToken = "REFRESH-TOKEN-xyz-older", ""
	if err := (&sessions.Cache{Store: files}).Put(context.Background(), "sess-older", older); err != nil {
		t.Fatal(err)
	}

	out, err := runLogout(t, nil, "--all")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	empty(t, kr, files)
	noTokenIn(t, out)
	got := a.received()
	if len(got) != 2 || got[0].Form.Get("token") != "REFRESH-TOKEN-xyz" || got[1].Form.Get("token") != "ACCESS-TOKEN-xyz" {
		t.Errorf("issuer a received %d revocations, want its refresh and access tokens", len(got))
	}
	for _, r := range got {
		if r.Form.Get("client_id") != "pinniped-cli" {
			t.Errorf("issuer a received client_id %q", r.Form.Get("client_id"))
		}
	}
	if got := b.received(); len(got) != 1 || got[0].Form.Get("token") != "REFRESH-TOKEN-xyz-b" || got[0].Form.Get("client_id") != "client-of-b" || got[0].Form.Has("client_secret") {
		t.Errorf("issuer b received %d revocations, want its refresh token with client_id client-of-b", len(got))
	}
	for _, want := range []string{"1 session(s) were cached by an older pinniped",
		"Revoked the session's refresh token at " + a.URL, "Revoked the session's refresh token at " + b.URL} {
		if !strings.Contains(out, want) {
			t.Errorf("did not say %q:\n%s", want, out)
		}
	}
}

// fetchedPage is what a browser found at the end-session page's URL.
type fetchedPage struct {
	header        http.Header
	action        string
	form          url.Values
	again, others int
}

// browse fetches u as a browser would, reads the form the page posts, and
// fetches u again and another path of its server.
func browse(t *testing.T, u string) fetchedPage {
	t.Helper()
	resp, err := http.Get(u) //nolint:noctx // a test's browser
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the page answered HTTP %d", resp.StatusCode)
	}
	doc, err := xhtml.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := fetchedPage{header: resp.Header, form: url.Values{}}
	forms := 0
	var walk func(*xhtml.Node)
	walk = func(n *xhtml.Node) {
		if n.Type == xhtml.ElementNode {
			attr := map[string]string{}
			for _, a := range n.Attr {
				attr[a.Key] = a.Val
			}
			switch n.Data {
			case "form":
				forms++
				p.action = attr["action"]
				if !strings.EqualFold(attr["method"], "post") {
					t.Errorf("the form's method is %q", attr["method"])
				}
			case "input":
				p.form.Add(attr["name"], attr["value"])
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if forms != 1 {
		t.Errorf("the page has %d forms", forms)
	}
	status := func(u string) int {
		resp, err := http.Get(u) //nolint:noctx // a test's browser
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	p.again = status(u)
	other, _ := url.Parse(u)
	other.Path = "/not-the-page"
	p.others = status(other.String())
	return p
}

// TestLogoutEndSession: --end-session opens the browser at a one-shot
// loopback page (its URL carries no token) that posts the ID token as
// id_token_hint and the client ID to the issuer's end_session_endpoint;
// the page is served once, to its own path only. Without a browser, the
// person is told to sign out at the issuer and no token is printed; an
// issuer without the endpoint is said to have none.
func TestLogoutEndSession(t *testing.T) {
	ti := newTestIssuer(t)
	ti.RevocationEndpoint = ti.URL + "/revoke"
	ti.EndSessionEndpoint = ti.URL + `/end_session?ui_locales=en&x="><b>`
	args := ti.args()

	kr, files, kubeconfig := setup(t, args, nil)
	cacheSession(t, kr, args, session())
	var opened []string
	var page fetchedPage
	out, err := runLogout(t, func(u string) error {
		opened = append(opened, u)
		page = browse(t, u)
		return nil
	}, "--kubeconfig="+kubeconfig, "--end-session")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	empty(t, kr, files)
	noTokenIn(t, out)
	if len(opened) != 1 {
		t.Fatalf("opened %d pages", len(opened))
	}
	noTokenIn(t, opened[0])
	u, err := url.Parse(opened[0])
	if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || len(u.Path) < 40 || u.RawQuery != "" {
		t.Errorf("opened %s, want a loopback page at an unguessable path", opened[0])
	}
	want := url.Values{"id_token_hint": {"ID-TOKEN-xyz"}, "client_id": {"pinniped-cli"}}
	if page.action != ti.EndSessionEndpoint || page.form.Encode() != want.Encode() {
		t.Errorf("the page posts %v to %s, want %v to %s", page.form, page.action, want, ti.EndSessionEndpoint)
	}
	csp := page.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "form-action https:") ||
		page.header.Get("Cache-Control") != "no-store" || page.header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("the page's headers: %v", page.header)
	}
	if page.again != http.StatusNotFound || page.others != http.StatusNotFound {
		t.Errorf("a second fetch answered %d, another path %d; want 404 for both", page.again, page.others)
	}
	if !strings.Contains(out, "Your browser was sent to end your session at "+ti.URL) {
		t.Errorf("said:\n%s", out)
	}
	if len(ti.received()) != 2 {
		t.Errorf("--end-session did not revoke too: %+v", ti.received())
	}
	if _, err := http.Get(opened[0]); err == nil { //nolint:noctx,bodyclose // must fail: the listener is closed
		t.Error("the page's listener still answers after logout")
	}

	// No browser: the person is told where to sign out, without a token.
	cacheSession(t, kr, args, session())
	out, err = runLogout(t, nil, "--kubeconfig="+kubeconfig, "--end-session")
	endpoint, _ := url.Parse(ti.EndSessionEndpoint)
	if err != nil || !strings.Contains(out, "No browser could be opened") || !strings.Contains(out, "sign out there (its logout page is "+endpoint.String()+")") {
		t.Errorf("without a browser: %v\n%s", err, out)
	}
	noTokenIn(t, out)

	// A browser that never comes: the wait ends, says the session was not
	// ended and where to sign out, and logout fails, as when the request
	// to end it fails.
	defer func(d time.Duration) { endSessionWait = d }(endSessionWait)
	endSessionWait = 50 * time.Millisecond
	cacheSession(t, kr, args, session())
	out, err = runLogout(t, func(string) error { return nil }, "--kubeconfig="+kubeconfig, "--end-session")
	if err == nil || !strings.Contains(out, "waiting up to 50ms") || !strings.Contains(out, "your session there was NOT ended: your browser did not load the page that ends it within 50ms") ||
		!strings.Contains(out, "sign out there (its logout page is "+endpoint.String()+")") || strings.Contains(out, "Your browser was sent") {
		t.Errorf("with a browser that never loads the page: %v\n%s", err, out)
	}
	noTokenIn(t, out)

	// No end_session_endpoint.
	ti.EndSessionEndpoint = ""
	cacheSession(t, kr, args, session())
	out, err = runLogout(t, func(u string) error { t.Errorf("opened %s", u); return nil }, "--kubeconfig="+kubeconfig, "--end-session")
	if err != nil || !strings.Contains(out, "the issuer has no end_session_endpoint") {
		t.Errorf("without an end_session_endpoint: %v\n%s", err, out)
	}
	noTokenIn(t, out)
}

// failingStore is a file fallback that answers every request with err, as
// one whose directory another user owns does.
type failingStore struct {
	cache.Store
	err error
}

func (f failingStore) Get(context.Context, string) ([]byte, error) { return nil, f.err }
func (f failingStore) Set(context.Context, string, []byte) error   { return f.err }
func (f failingStore) Delete(context.Context, string) error        { return f.err }

// withFiles makes st the file fallback logout looks in, beside setup's keyring.
func withFiles(t *testing.T, st cache.Store) {
	t.Helper()
	b := testCaches.(bothStores)
	b.files = st
	testCaches = b
}

// TestLogoutRevokesWhatItRemovedWhenTheFilesFail: the keyring's session is
// removed, then the file fallback fails: the refresh token read from the
// keyring is no longer anywhere a second logout could find it, so it is
// revoked before the failure is reported.
func TestLogoutRevokesWhatItRemovedWhenTheFilesFail(t *testing.T) {
	ti := newTestIssuer(t)
	ti.RevocationEndpoint = ti.URL + "/revoke"
	args := ti.args()
	kr, files, kubeconfig := setup(t, args, nil)
	cacheSession(t, kr, args, session())
	withFiles(t, failingStore{files, fs.ErrPermission})
	out, err := runLogout(t, nil, "--kubeconfig="+kubeconfig)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("logout did not report the file fallback's failure: %v\n%s", err, out)
	}
	empty(t, kr)
	noTokenIn(t, out+err.Error())
	got := ti.received()
	if len(got) != 2 || got[0].Form.Get("token") != "REFRESH-TOKEN-xyz" || got[1].Form.Get("token") != "ACCESS-TOKEN-xyz" {
		t.Fatalf("the issuer received %d revocations, want the refresh and access tokens:\n%s", len(got), out)
	}
}

// indexFails is a keyring that stops taking writes to the session index,
// so that removing a session removes its value and then fails.
type indexFails struct{ memKeyring }

func (k indexFails) Set(service, user, value string) error {
	if strings.Contains(user, "pinniped-session-index") {
		return errors.New("the keyring refused the write")
	}
	return k.memKeyring.Set(service, user, value)
}

// TestLogoutRevokesASessionWhoseRemovalFailedPartway: the session's value
// is deleted and the index update fails: the session read before is
// revoked all the same, since nothing will find it again to revoke it.
func TestLogoutRevokesASessionWhoseRemovalFailedPartway(t *testing.T) {
	ti := newTestIssuer(t)
	ti.RevocationEndpoint = ti.URL + "/revoke"
	args := ti.args()
	kr, _, kubeconfig := setup(t, args, nil)
	cacheSession(t, kr, args, session())
	store := kr.(*keyringstore.Store)
	store.Backend = indexFails{store.Backend.(memKeyring)}
	out, err := runLogout(t, nil, "--kubeconfig="+kubeconfig)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	noTokenIn(t, out)
	if !strings.Contains(out, "OS keyring") || !strings.Contains(out, "was not removed") {
		t.Errorf("did not report the keyring's failure:\n%s", out)
	}
	got := ti.received()
	if len(got) != 2 || got[0].Form.Get("token") != "REFRESH-TOKEN-xyz" || got[1].Form.Get("token") != "ACCESS-TOKEN-xyz" {
		t.Fatalf("the issuer received %d revocations, want the refresh and access tokens:\n%s", len(got), out)
	}
}

// TestLogoutAllWaitsForARefreshInProgress: a refresh holding a session's
// lock rotates its refresh token while logout --all waits: the token
// revoked is the new one, read under the lock, and no session is left.
func TestLogoutAllWaitsForARefreshInProgress(t *testing.T) {
	ti := newTestIssuer(t)
	ti.RevocationEndpoint = ti.URL + "/revoke"
	args := ti.args()
	kr, files, _ := setup(t, args, nil)
	// The files, not the test keyring, which is not safe for concurrent use.
	cacheSession(t, files, args, session())
	c, err := flagset.ParseOIDC(args[2:], func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	dir, err := testCaches.LockDir("keyring")
	if err != nil {
		t.Fatal(err)
	}
	held, err := lock.Acquire(context.Background(), dir, c.SessionKey())
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runLogout(t, nil, "--all")
		done <- result{out, err}
	}()
	// The refresh finishes while logout waits (10 s) for its lock.
	time.Sleep(300 * time.Millisecond)
	rotated := session()
	rotated.RefreshToken, rotated.AccessToken = "REFRESH-TOKEN-xyz-rotated", "ACCESS-TOKEN-xyz-rotated"
	cacheSession(t, files, args, rotated)
	_ = held.Unlock()
	r := <-done
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.out)
	}
	empty(t, kr, files)
	noTokenIn(t, r.out)
	var tokens []string
	for _, got := range ti.received() {
		tokens = append(tokens, got.Form.Get("token"))
	}
	if strings.Join(tokens, " ") != "REFRESH-TOKEN-xyz-rotated ACCESS-TOKEN-xyz-rotated" {
		t.Fatalf("the issuer received revocations of %q, want the rotated refresh and access tokens", tokens)
	}
}

// TestLogoutAllUnderARunningLogin: a session whose login lock stays held
// is neither removed nor revoked, and logout --all says to run it again.
func TestLogoutAllUnderARunningLogin(t *testing.T) {
	ti := newTestIssuer(t)
	ti.RevocationEndpoint = ti.URL + "/revoke"
	args := ti.args()
	kr, files, _ := setup(t, args, nil)
	cacheSession(t, files, args, session())
	c, err := flagset.ParseOIDC(args[2:], func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	dir, err := testCaches.LockDir("keyring")
	if err != nil {
		t.Fatal(err)
	}
	held, err := lock.Acquire(context.Background(), dir, c.SessionKey())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Unlock() }()
	var out bytes.Buffer
	f := cmdutil.Test(nil, &out, &out, nil)
	f.Now, f.Caches = time.Now, testCaches
	cmd := NewCmdLogout(f, func(ctx context.Context, o *Options) error {
		o.LoginWait = 100 * time.Millisecond
		return o.Run(ctx)
	})
	cmd.SetArgs([]string{"--all"})
	if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("logout --all under a running login: %v\n%s", err, out.String())
	}
	if got, err := (&sessions.Cache{Store: files}).Load(context.Background(), c.SessionKey()); err != nil || got == nil || got.RefreshToken != "REFRESH-TOKEN-xyz" {
		t.Errorf("the session of the running login was removed (%v)", err)
	}
	if got := ti.received(); len(got) != 0 {
		t.Errorf("the issuer received %d revocations", len(got))
	}
	empty(t, kr)
}

// TestLogoutAllRevokesWithoutTheClientSecret: sessions do not keep the
// client secret of their login; --all revokes them with the client ID
// alone, and an issuer that wants the secret (invalid_client) is a
// warning, not a failure.
func TestLogoutAllRevokesWithoutTheClientSecret(t *testing.T) {
	accepts, refuses := newTestIssuer(t), newTestIssuer(t)
	accepts.RevocationEndpoint, refuses.RevocationEndpoint = accepts.URL+"/revoke", refuses.URL+"/revoke"
	refuses.RevokeStatus, refuses.RevokeBody = http.StatusUnauthorized, `{"error":"invalid_client"}`
	kr, files, _ := setup(t, accepts.args(), nil)
	sa, sr := session(), session()
	sa.RefreshToken, sa.AccessToken = "REFRESH-TOKEN-xyz-a", ""
	sr.RefreshToken, sr.AccessToken = "REFRESH-TOKEN-xyz-r", "ACCESS-TOKEN-xyz-r"
	cacheSession(t, kr, accepts.args("--client-secret=s3cret"), sa)
	cacheSession(t, files, refuses.args("--client-secret=s3cret"), sr)

	out, err := runLogout(t, nil, "--all")
	if err != nil {
		t.Fatalf("a refusal of the client ID alone failed logout: %v\n%s", err, out)
	}
	empty(t, kr, files)
	noTokenIn(t, out)
	if got := accepts.received(); len(got) != 1 || got[0].Form.Get("token") != "REFRESH-TOKEN-xyz-a" || got[0].Form.Get("client_id") != "pinniped-cli" || got[0].Form.Has("client_secret") {
		t.Errorf("the issuer that accepts the client ID alone received %+v", got)
	}
	if got := refuses.received(); len(got) != 1 || got[0].Form.Get("token") != "REFRESH-TOKEN-xyz-r" {
		t.Errorf("the issuer that wants the secret received %d requests, want the refresh token once", len(got))
	}
	for _, want := range []string{"Revoked the session's refresh token at " + accepts.URL,
		"! " + refuses.URL + ": the session was logged in with --client-secret, which sessions do not keep, and the issuer does not revoke without it",
		"run pinniped logout --context=NAME for it before --all"} {
		if !strings.Contains(out, want) {
			t.Errorf("did not say %q:\n%s", want, out)
		}
	}
}

// TestLogoutAcceptsAny2xx: an issuer answering 204 No Content revoked
// the token; it is not a failure.
func TestLogoutAcceptsAny2xx(t *testing.T) {
	ti := newTestIssuer(t)
	ti.RevocationEndpoint, ti.RevokeStatus = ti.URL+"/revoke", http.StatusNoContent
	args := ti.args()
	kr, _, kubeconfig := setup(t, args, nil)
	cacheSession(t, kr, args, session())
	out, err := runLogout(t, nil, "--kubeconfig="+kubeconfig)
	if err != nil || !strings.Contains(out, "Revoked the session's refresh token at "+ti.URL) {
		t.Fatalf("an issuer answering 204: %v\n%s", err, out)
	}
}

// TestLogoutUnreachableIssuer: with --all, an issuer that cannot be
// reached is said once however many sessions it had; with only
// --end-session to do (no session cached), no refresh token is said to
// stay valid.
func TestLogoutUnreachableIssuer(t *testing.T) {
	ti := newTestIssuer(t)
	args := ti.args()
	kr, files, kubeconfig := setup(t, args, nil)
	ti.srv.Close()
	s1, s2 := session(), session()
	s2.RefreshToken, s2.AccessToken = "REFRESH-TOKEN-xyz-2", "ACCESS-TOKEN-xyz-2"
	cacheSession(t, kr, args, s1)
	cacheSession(t, files, ti.args("--scopes=openid,offline_access,email"), s2)
	out, err := runLogout(t, nil, "--all")
	if err == nil {
		t.Fatalf("logout --all with an unreachable issuer succeeded:\n%s", out)
	}
	empty(t, kr, files)
	if n := strings.Count(out, "could not read the issuer's discovery document"); n != 1 {
		t.Errorf("the unreachable issuer was said %d times, want once:\n%s", n, out)
	}

	out, err = runLogout(t, nil, "--kubeconfig="+kubeconfig, "--end-session")
	if err == nil || !strings.Contains(out, "could not read the issuer's discovery document") || strings.Contains(out, "refresh token") || strings.Contains(out, "stays valid") {
		t.Errorf("--end-session alone with an unreachable issuer: %v\n%s", err, out)
	}
}

// TestLogoutRevokedTokenStopsWorking: against a provider that refuses a
// revoked refresh token, the session's refresh token no longer refreshes
// after logout, while another session's still does.
func TestLogoutRevokedTokenStopsWorking(t *testing.T) {
	ctx := context.Background()
	op := oidctest.New(t)
	login := &config.OIDC{Issuer: op.URL, ClientID: op.ClientID, CABundle: op.CABundle}
	p, err := oidclogin.Discover(ctx, login, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	loggedOut, other := passwordSession(t, p), passwordSession(t, p)
	args := []string{"login", "oidc", "--issuer=" + op.URL, "--client-id=" + op.ClientID, "--ca-bundle-data=" + base64.StdEncoding.EncodeToString(op.CABundle)}
	kr, _, kubeconfig := setup(t, args, nil)
	cacheSession(t, kr, args, loggedOut)
	out, err := runLogout(t, nil, "--kubeconfig="+kubeconfig)
	if err != nil || !strings.Contains(out, "Revoked the session's refresh token at "+op.URL) {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := p.Refresh(ctx, loggedOut.RefreshToken); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("the logged-out session's refresh token still refreshes (%v)", err)
	}
	if _, err := p.Refresh(ctx, other.RefreshToken); err != nil {
		t.Errorf("another session's refresh token no longer refreshes: %v", err)
	}
}

// passwordSession is a new session at p's test provider.
func passwordSession(t *testing.T, p *oidclogin.Provider) *sessions.Tokens {
	t.Helper()
	s, err := p.PasswordGrant(context.Background(), "alice", "password")
	if err != nil || s.RefreshToken == "" {
		t.Fatalf("no session from the test provider: %v", err)
	}
	return s
}

// TestLogoutErrorsAreEscaped: an error's text (here a browser opener's,
// which may echo what it was given) reaches the terminal escaped, as all
// text from elsewhere does.
func TestLogoutErrorsAreEscaped(t *testing.T) {
	ti := newTestIssuer(t)
	ti.EndSessionEndpoint = ti.URL + "/end_session"
	args := ti.args()
	kr, _, kubeconfig := setup(t, args, nil)
	cacheSession(t, kr, args, session())
	out, _ := runLogout(t, func(string) error {
		return errors.New("opener said \x1b]0;pwned\x07\u009b2J\u202e")
	}, "--kubeconfig="+kubeconfig, "--end-session")
	if strings.ContainsAny(out, "\x1b\x07\u009b\u202e") || !strings.Contains(out, `opener said \x1b]0;pwned\x07\u009b2J\u202e`) {
		t.Errorf("want the error escaped:\n%q", out)
	}
}
