package logout

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
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
	srv *httptest.Server

	// RevocationEndpoint and EndSessionEndpoint are advertised when set
	// ("/revoke" and "/end_session" are served).
	RevocationEndpoint, EndSessionEndpoint string
	// Supervisor makes discovery a Pinniped Supervisor's.
	Supervisor bool
	// RevokeStatus and RevokeBody answer revocations (default 200, empty).
	RevokeStatus int
	RevokeBody   string

	mu       sync.Mutex
	requests []request
}

func newTestIssuer(t *testing.T) *testIssuer {
	ti := &testIssuer{}
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
		ti.mu.Unlock()
		if status == 0 {
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})
	ti.srv = httptest.NewTLSServer(mux)
	t.Cleanup(ti.srv.Close)
	ti.URL = ti.srv.URL
	ti.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ti.srv.Certificate().Raw})
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
	return append([]string{"login", "oidc", "--issuer=" + ti.URL, "--client-id=pinniped-cli",
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
	if err := (&credcache.Cache{Store: st}).Put(ctx, c.CredentialKey(config.Cluster{Server: "https://10.0.0.1:6443"}), "label", cred); err != nil {
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
// and a revocation endpoint over plain http (which must receive nothing)
// each leave no local copy behind, are reported, and fail the command.
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
// it recorded of its login (issuer, client ID, CA); a session cached
// before sessions recorded that, or logged in with a client secret the
// session does not keep, is removed and said not to be revoked.
func TestLogoutAllRevokesEachSession(t *testing.T) {
	a, b := newTestIssuer(t), newTestIssuer(t)
	a.RevocationEndpoint, b.RevocationEndpoint = a.URL+"/revoke", b.URL+"/revoke"
	kr, files, _ := setup(t, a.args(), nil)
	cacheSession(t, kr, a.args(), session())
	sb := session()
	sb.RefreshToken, sb.AccessToken = "REFRESH-TOKEN-xyz-b", ""
	cacheSession(t, files, b.args(), sb)
	older := session()
	older.Issuer = nil
	if err := (&sessions.Cache{Store: files}).Put(context.Background(), "sess-older", older); err != nil {
		t.Fatal(err)
	}
	cacheSession(t, files, b.args("--client-secret=s3cret"), session())

	out, err := runLogout(t, nil, "--all")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	empty(t, kr, files)
	noTokenIn(t, out)
	if got := a.received(); len(got) != 2 || got[0].Form.Get("token") != "REFRESH-TOKEN-xyz" || got[1].Form.Get("token") != "ACCESS-TOKEN-xyz" {
		t.Errorf("issuer a received %+v", got)
	}
	if got := b.received(); len(got) != 1 || got[0].Form.Get("token") != "REFRESH-TOKEN-xyz-b" || got[0].Form.Get("client_secret") != "" {
		t.Errorf("issuer b received %+v", got)
	}
	for _, want := range []string{"1 session(s) were cached by an older pinniped", "1 session(s) were logged in with --client-secret",
		"Revoked the session's refresh token at " + a.URL, "Revoked the session's refresh token at " + b.URL} {
		if !strings.Contains(out, want) {
			t.Errorf("did not say %q:\n%s", want, out)
		}
	}
}

// TestLogoutEndSession: --end-session opens the browser at the issuer's
// end_session_endpoint with the ID token as id_token_hint and the client
// ID, and prints that link (it carries the ID token) only when no browser
// opens; an issuer without the endpoint is said to have none.
func TestLogoutEndSession(t *testing.T) {
	ti := newTestIssuer(t)
	ti.RevocationEndpoint = ti.URL + "/revoke"
	ti.EndSessionEndpoint = ti.URL + "/end_session?ui_locales=en"
	args := ti.args()

	kr, files, kubeconfig := setup(t, args, nil)
	cacheSession(t, kr, args, session())
	var opened []string
	out, err := runLogout(t, func(u string) error { opened = append(opened, u); return nil }, "--kubeconfig="+kubeconfig, "--end-session")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	empty(t, kr, files)
	noTokenIn(t, out)
	if len(opened) != 1 {
		t.Fatalf("opened %q", opened)
	}
	u, err := url.Parse(opened[0])
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Scheme+"://"+u.Host != ti.URL || u.Path != "/end_session" || q.Get("id_token_hint") != "ID-TOKEN-xyz" || q.Get("client_id") != "pinniped-cli" || q.Get("ui_locales") != "en" {
		t.Errorf("opened %s", opened[0])
	}
	if len(ti.received()) != 2 {
		t.Errorf("--end-session did not revoke too: %+v", ti.received())
	}

	// No browser: the person is given the link.
	cacheSession(t, kr, args, session())
	out, err = runLogout(t, nil, "--kubeconfig="+kubeconfig, "--end-session")
	if err != nil || !strings.Contains(out, opened[0]) || !strings.Contains(out, "do not share it") {
		t.Errorf("without a browser: %v\n%s", err, out)
	}

	// No end_session_endpoint.
	ti.EndSessionEndpoint = ""
	cacheSession(t, kr, args, session())
	out, err = runLogout(t, func(u string) error { t.Errorf("opened %s", u); return nil }, "--kubeconfig="+kubeconfig, "--end-session")
	if err != nil || !strings.Contains(out, "the issuer has no end_session_endpoint") {
		t.Errorf("without an end_session_endpoint: %v\n%s", err, out)
	}
	noTokenIn(t, out)
}
