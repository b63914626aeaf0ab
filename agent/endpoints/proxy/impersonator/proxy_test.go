package impersonator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
	"github.com/pinniped-kit/pinniped/agent/plumbing/observe"
)

// upstream records the headers the "API server" receives.
type upstream struct {
	calls atomic.Int64
	last  atomic.Pointer[http.Header]
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	h := r.Header.Clone()
	u.last.Store(&h)
	switch r.URL.Path {
	case "/watch":
		// Stream two events with a pause: the client must see the first
		// before the second is written.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream-Proto", r.Proto)
		_, _ = io.WriteString(w, `{"type":"ADDED"}`+"\n")
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond)
		_, _ = io.WriteString(w, `{"type":"MODIFIED"}`+"\n")
	case "/exec":
		if r.Header.Get("Upgrade") == "" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
		_ = buf.Flush()
		line, _ := buf.ReadString('\n')
		_, _ = buf.WriteString("echo: " + line)
		_ = buf.Flush()
	default:
		w.WriteHeader(http.StatusOK)
	}
}

type fixedAuthn struct{ u user.Info }

func (a fixedAuthn) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if r.TLS == nil && r.Header.Get("X-Test-Anonymous") != "" {
		return nil, false, nil
	}
	return &authenticator.Response{User: a.u}, true, nil
}

type policy struct{ allow bool }

func (p policy) CanImpersonate(_ context.Context, _ user.Info, _ *impersonator.Request) (bool, string, error) {
	return p.allow, "no RBAC rule allows it", nil
}

// shippedTransports serves h as the API server, over TLS offering
// HTTP/2 as kube-apiserver does, and returns its URL and the transports
// the agent builds for it (NewTransports), so the suites test the hop the
// agent really makes: reads over HTTP/1.1; writes and watches over HTTP/2.
func shippedTransports(t *testing.T, h http.Handler) (*url.URL, *impersonator.Transports) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr, err := impersonator.NewTransports(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL)
	return u, tr
}

func setup(t *testing.T, allow bool) (*httptest.Server, *upstream) {
	t.Helper()
	up := &upstream{}
	u, tr := shippedTransports(t, up)
	p := &impersonator.Proxy{
		Log:      slog.New(slog.DiscardHandler),
		Upstream: u, Transport: tr.Impersonating, UpgradeTransport: tr.ImpersonatingUpgrade, ImpersonatorToken: &fakeImpersonatorToken{},
		Authn: fixedAuthn{u: &user.DefaultInfo{Name: "alice", Groups: []string{"devs", "system:authenticated"},
			Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"X509SHA256=abc"}}}},
		Authz: policy{allow: allow},
	}
	p.Init()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv, up
}

// status makes a GET and returns only the status code.
func status(t *testing.T, url string, headers map[string][]string) int {
	t.Helper()
	resp := get(t, url, headers)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func get(t *testing.T, url string, headers map[string][]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestHeaderSmuggling: whatever identity headers a client sends, the API
// server sees only the authenticated user.
func TestHeaderSmuggling(t *testing.T) {
	srv, up := setup(t, false)
	smuggled := map[string][]string{
		"X-Remote-User": {"admin"}, "X-Remote-Group": {"system:masters"}, "X-Remote-Extra-Scopes": {"*"},
		"Authorization": {"Bearer stolen"}, "Proxy-Authorization": {"Basic eA=="},
		"X-Forwarded-For": {"10.0.0.1"}, "X-Forwarded-Host": {"evil"}, "Forwarded": {"for=1.2.3.4"}, "X-Real-Ip": {"1.2.3.4"},
	}
	if code := status(t, srv.URL+"/api", smuggled); code != 200 {
		t.Fatalf("status %d", code)
	}
	h := *up.last.Load()
	for k := range smuggled {
		if v := h.Values(k); len(v) > 0 && (k != "Authorization" || !slices.Equal(v, []string{"Bearer " + impersonatorToken})) {
			t.Errorf("client header %s reached the API server: %v", k, v)
		}
	}
	if !slices.Equal(h.Values("Authorization"), []string{"Bearer " + impersonatorToken}) {
		t.Errorf("the impersonation ServiceAccount's token did not replace the client's: %v", h.Values("Authorization"))
	}
	if h.Get("Impersonate-User") != "alice" || strings.Join(h.Values("Impersonate-Group"), ",") != "devs" {
		t.Errorf("impersonation headers: %v", h)
	}
	if h.Get("Impersonate-Extra-Authentication.kubernetes.io%2fcredential-Id") != "X509SHA256=abc" {
		t.Errorf("extra not forwarded: %v", h)
	}
}

func TestNestedImpersonation(t *testing.T) {
	want := map[string][]string{"Impersonate-User": {"bob"}, "Impersonate-Group": {"ops", "system:masters"}}

	denied, up := setup(t, false)
	if code := status(t, denied.URL+"/api", want); code != http.StatusForbidden || up.calls.Load() != 0 {
		t.Fatalf("denied impersonation: status %d, upstream calls %d", code, up.calls.Load())
	}

	allowed, up2 := setup(t, true)
	if code := status(t, allowed.URL+"/api", want); code != 200 {
		t.Fatalf("allowed impersonation: status %d", code)
	}
	h := *up2.last.Load()
	if h.Get("Impersonate-User") != "bob" || strings.Join(h.Values("Impersonate-Group"), ",") != "ops,system:masters" {
		t.Fatalf("upstream sees %v", h)
	}
	var original map[string]any
	if err := json.Unmarshal([]byte(h.Get("Impersonate-Extra-Original-User-Info.impersonation-Proxy.concierge.pinniped.dev")), &original); err != nil || original["username"] != "alice" {
		t.Fatalf("original user not recorded: %v (%v)", h, err)
	}

	for name, hdrs := range map[string]map[string][]string{
		"group without user": {"Impersonate-Group": {"system:masters"}},
		"reserved extra":     {"Impersonate-User": {"bob"}, "Impersonate-Extra-Original-User-Info.impersonation-Proxy.concierge.pinniped.dev": {"{}"}},
	} {
		if code := status(t, allowed.URL+"/api", hdrs); code != http.StatusForbidden {
			t.Errorf("%s: status %d", name, code)
		}
	}
}

func TestUnauthenticated(t *testing.T) {
	srv, up := setup(t, true)
	if code := status(t, srv.URL+"/api", map[string][]string{"X-Test-Anonymous": {"1"}}); code != http.StatusUnauthorized || up.calls.Load() != 0 {
		t.Fatalf("status %d, upstream calls %d", code, up.calls.Load())
	}
}

func TestWatchIsStreamed(t *testing.T) {
	srv, _ := setup(t, false)
	// A watch goes upstream over HTTP/2; anything else that streams (a
	// proxied pod's server-sent events, say) over HTTP/1.1: both reach the
	// client as they are written.
	for path, proto := range map[string]string{"/watch?watch=1": "HTTP/2.0", "/watch": "HTTP/1.1"} {
		resp := get(t, srv.URL+path, nil)
		start := time.Now()
		first, err := bufio.NewReader(resp.Body).ReadString('\n')
		_ = resp.Body.Close()
		if err != nil || !strings.Contains(first, "ADDED") {
			t.Fatalf("%s: %q %v", path, first, err)
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Fatalf("%s: first event arrived after %v: the proxy buffered the stream", path, d)
		}
		if got := resp.Header.Get("X-Upstream-Proto"); got != proto {
			t.Errorf("%s went upstream over %q, want %s", path, got, proto)
		}
	}
}

func TestUpgradePassesThrough(t *testing.T) {
	srv, up := setup(t, false)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Remote-User: root\r\nAuthorization: Bearer stolen\r\n\r\n")
	r := bufio.NewReader(conn)
	status, _ := r.ReadString('\n')
	if !strings.Contains(status, "101") {
		t.Fatalf("no upgrade: %q", status)
	}
	for {
		line, _ := r.ReadString('\n')
		if line == "\r\n" || line == "" {
			break
		}
	}
	_, _ = io.WriteString(conn, "hello\n")
	echo, _ := r.ReadString('\n')
	if echo != "echo: hello\n" {
		t.Fatalf("stream after upgrade: %q", echo)
	}
	h := *up.last.Load()
	if h.Get("Impersonate-User") != "alice" || h.Get("X-Remote-User") != "" || !slices.Equal(h.Values("Authorization"), []string{"Bearer " + impersonatorToken}) {
		t.Fatalf("upgrade request reached the API server with %v", h)
	}
}

// tokenAuthn accepts one token, as a TokenReview would.
type tokenAuthn struct{}

func (tokenAuthn) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if r.Header.Get("Authorization") != "Bearer sa-token" {
		return nil, false, nil
	}
	r.Header.Del("Authorization") // as bearertoken.Authenticator does
	return &authenticator.Response{User: &user.DefaultInfo{Name: "system:serviceaccount:ci:builder", UID: "u-1"}}, true, nil
}

type noCert struct{}

func (noCert) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	return nil, false, nil
}

// recordingTransport marks which transport carried a request.
type recordingTransport struct {
	name string
	used *atomic.Pointer[string]
}

func (t recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.used.Store(&t.name)
	return http.DefaultTransport.RoundTrip(r)
}

// TestTokensAndAnonymousGoDirect: a ServiceAccount token is forwarded as it
// came, without the agent's credentials or impersonation; anonymous requests
// go without credentials, so the API server's own anonymous setting decides.
func TestTokensAndAnonymousGoDirect(t *testing.T) {
	up := &upstream{}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	u, _ := url.Parse(upSrv.URL)
	var used atomic.Pointer[string]
	var seen []observe.ProxyRequest
	p := &impersonator.Proxy{
		Log:      slog.New(slog.DiscardHandler),
		Upstream: u, Transport: recordingTransport{"agent", &used}, UpgradeTransport: &http.Transport{},
		DirectTransport: recordingTransport{"direct", &used}, DirectUpgradeTransport: &http.Transport{},
		// Set, so the checks below also show it never goes direct.
		ImpersonatorToken: &fakeImpersonatorToken{},
		Authn:             noCert{}, Tokens: tokenAuthn{}, Authz: policy{allow: false},
		Observe: func(o observe.ProxyRequest) { seen = append(seen, o) },
	}
	p.Init()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)

	smuggle := map[string][]string{"Authorization": {"Bearer sa-token"}, "X-Remote-User": {"admin"}, "X-Forwarded-For": {"1.2.3.4"},
		"Impersonate-User": {"bob"}, "Impersonate-Group": {"ops"}}
	if code := status(t, srv.URL+"/api", smuggle); code != 200 {
		t.Fatalf("token request: status %d", code)
	}
	h := *up.last.Load()
	if *used.Load() != "direct" || h.Get("Authorization") != "Bearer sa-token" || h.Get("X-Remote-User") != "" || h.Get("X-Forwarded-For") != "" {
		t.Fatalf("token request went via %s with %v", *used.Load(), h)
	}
	// Its nested impersonation is passed on for the API server to authorize
	// as the token's user, with no extra of ours.
	if h.Get("Impersonate-User") != "bob" || h.Get("Impersonate-Group") != "ops" || len(h.Values("Impersonate-Extra-Original-User-Info.impersonation-Proxy.concierge.pinniped.dev")) != 0 {
		t.Fatalf("nested impersonation for a token user: %v", h)
	}

	if code := status(t, srv.URL+"/api", map[string][]string{"Authorization": {"Bearer forged"}}); code != http.StatusUnauthorized {
		t.Fatalf("forged token: status %d", code)
	}
	calls := up.calls.Load()
	if code := status(t, srv.URL+"/version", map[string][]string{"X-Remote-User": {"admin"}}); code != 200 || up.calls.Load() != calls+1 {
		t.Fatalf("anonymous: status %d", code)
	}
	h = *up.last.Load()
	if *used.Load() != "direct" || h.Get("Authorization") != "" || h.Get("X-Remote-User") != "" || h.Get("Impersonate-User") != "" {
		t.Fatalf("anonymous request went via %s with %v", *used.Load(), h)
	}
	methods := []observe.AuthMethod{}
	for _, o := range seen {
		methods = append(methods, o.Method)
	}
	if len(seen) != 3 || seen[0].Method != observe.MethodToken || seen[0].Username != "system:serviceaccount:ci:builder" ||
		seen[1].Code != http.StatusUnauthorized || seen[2].Method != observe.MethodAnonymous {
		t.Fatalf("observations: %v %+v", methods, seen)
	}
}
