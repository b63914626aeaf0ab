package impersonator_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/rawhttptest"
)

// aliceIdentity is exactly what the API server must see for the test
// certificate's user (see setup): the proxy's headers and nothing else.
var aliceIdentity = http.Header{
	"Authorization":     {"Bearer " + impersonatorToken},
	"Impersonate-User":  {"alice"},
	"Impersonate-Group": {"devs"},
	"Impersonate-Extra-Authentication.kubernetes.io%2fcredential-Id": {"X509SHA256=abc"},
}

// originalUserHeader carries the user who asked for a nested impersonation.
var originalUserHeader = http.CanonicalHeaderKey("Impersonate-Extra-" + impersonator.OriginalUserExtra)

// identityOf keeps the identity-carrying headers of a request the API
// server received, in any case or spelling.
func identityOf(h http.Header) http.Header {
	out := http.Header{}
	for k, vs := range h {
		lk := strings.ReplaceAll(strings.ToLower(k), "_", "-")
		if lk == "authorization" || lk == "proxy-authorization" || lk == "forwarded" || lk == "x-real-ip" ||
			strings.HasPrefix(lk, "impersonate-") || strings.HasPrefix(lk, "x-remote-") || strings.HasPrefix(lk, "x-forwarded-") {
			out[k] = vs
		}
	}
	return out
}

func sameIdentity(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// rawRequest sends one request as raw bytes, as any client can, and returns
// the status code (0 when the server closed without answering).
func rawRequest(t *testing.T, addr, req string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return rawhttptest.Send(t, conn, req)
}

// TestConnectionHeaderCannotRemoveTheProxysIdentity: a client that names
// identity headers in Connection (or plays any other hop-by-hop trick) never
// reaches the API server without exactly the proxy's identity headers.
// Through the real HTTP server and the real reverse proxy.
func TestConnectionHeaderCannotRemoveTheProxysIdentity(t *testing.T) {
	srv, up := setup(t, false)
	addr := strings.TrimPrefix(srv.URL, "http://")
	const refused, forwarded, denied, malformed = 400, 200, 403, -1
	for _, c := range []struct {
		name    string
		proto   string
		headers string
		want    int
	}{
		{"Connection names Impersonate-User", "HTTP/1.1", "Connection: Impersonate-User\r\n", refused},
		{"Connection names the groups", "HTTP/1.1", "Connection: Impersonate-Group\r\n", refused},
		{"Connection names the extra", "HTTP/1.1", "Connection: Impersonate-Extra-Authentication.kubernetes.io%2fcredential-Id\r\n", refused},
		{"Connection names the original-user extra", "HTTP/1.1", "Connection: Impersonate-Extra-Original-User-Info.impersonation-Proxy.concierge.pinniped.dev\r\n", refused},
		{"Connection names Impersonate-Uid", "HTTP/1.1", "Connection: Impersonate-Uid\r\n", refused},
		{"Connection names Authorization", "HTTP/1.1", "Connection: Authorization\r\n", refused},
		{"lower case", "HTTP/1.1", "connection: impersonate-user\r\n", refused},
		{"upper case", "HTTP/1.1", "CONNECTION: IMPERSONATE-USER, IMPERSONATE-GROUP\r\n", refused},
		{"comma-joined after an allowed token", "HTTP/1.1", "Connection: keep-alive, Impersonate-User\r\n", refused},
		{"odd spacing in the list", "HTTP/1.1", "Connection: ,\t Impersonate-User \t,\r\n", refused},
		{"no space after the colon", "HTTP/1.1", "Connection:Impersonate-User\r\n", refused},
		{"second Connection line", "HTTP/1.1", "Connection: keep-alive\r\nConnection: Impersonate-User\r\n", refused},
		{"HTTP/1.0", "HTTP/1.0", "Connection: Impersonate-User, keep-alive\r\n", refused},
		{"TE named in Connection", "HTTP/1.1", "TE: trailers\r\nConnection: TE\r\n", refused},
		{"space before the colon", "HTTP/1.1", "Connection : Impersonate-User\r\n", malformed},
		{"Upgrade named in Connection without an upgrade", "HTTP/1.1", "Connection: Upgrade\r\n", forwarded},
		{"Upgrade header without Connection", "HTTP/1.1", "Upgrade: websocket\r\n", forwarded},
		{"keep-alive", "HTTP/1.1", "Connection: Keep-Alive\r\nKeep-Alive: timeout=5\r\n", forwarded},
		{"close", "HTTP/1.1", "Connection: close\r\n", forwarded},
		{"HTTP/1.0 keep-alive", "HTTP/1.0", "Connection: keep-alive\r\n", forwarded},
		{"Proxy-Connection naming the user", "HTTP/1.1", "Proxy-Connection: Impersonate-User\r\n", forwarded},
		{"Keep-Alive naming the user", "HTTP/1.1", "Keep-Alive: Impersonate-User\r\n", forwarded},
		{"TE without Connection", "HTTP/1.1", "TE: trailers, Impersonate-User\r\n", forwarded},
		{"underscore spelling of a remote user", "HTTP/1.1", "X_Remote_User: admin\r\nImpersonate_Group: system:masters\r\n", forwarded},
		{"duplicated Impersonate-User", "HTTP/1.1", "Impersonate-User: admin\r\nImpersonate-User: alice\r\n", denied},
		{"comma-joined Impersonate-User", "HTTP/1.1", "Impersonate-User: admin, alice\r\n", denied},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := up.calls.Load()
			got := rawRequest(t, addr, "GET /api/v1/namespaces "+c.proto+"\r\nHost: x\r\n"+c.headers+"\r\n")
			switch c.want {
			case malformed:
				// The HTTP server itself refuses header names with spaces.
				if got != http.StatusBadRequest && got != 0 {
					t.Fatalf("status %d, want the server's 400", got)
				}
			default:
				if got != c.want {
					t.Fatalf("status %d, want %d", got, c.want)
				}
			}
			if c.want != forwarded {
				if up.calls.Load() != before {
					t.Fatal("the request reached the API server")
				}
				return
			}
			if up.calls.Load() != before+1 {
				t.Fatal("the request did not reach the API server")
			}
			if id := identityOf(*up.last.Load()); !sameIdentity(id, aliceIdentity) {
				t.Fatalf("the API server saw identity headers %v, want exactly %v", id, aliceIdentity)
			}
		})
	}
}

// TestHTTP2ConnectionHeaderIsRefused: HTTP/2 has no Connection header
// (RFC 9113 section 8.2.2); a client that sends one anyway, in raw frames,
// never reaches the API server.
func TestHTTP2ConnectionHeaderIsRefused(t *testing.T) {
	up := &upstream{}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	u, _ := url.Parse(upSrv.URL)
	p := &impersonator.Proxy{
		Log:      slog.New(slog.DiscardHandler),
		Upstream: u, Transport: http.DefaultTransport, UpgradeTransport: &http.Transport{}, ImpersonatorToken: &fakeImpersonatorToken{},
		Authn: fixedAuthn{u: &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}}},
		Authz: policy{allow: false},
	}
	p.Init()
	srv := httptest.NewUnstartedServer(p)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)

	for _, fields := range [][]hpack.HeaderField{
		{{Name: "connection", Value: "impersonate-user"}},
		{{Name: "connection", Value: "keep-alive, impersonate-group"}},
		{{Name: "te", Value: "trailers"}, {Name: "connection", Value: "te"}},
	} {
		code := rawhttptest.Get2(t, strings.TrimPrefix(srv.URL, "https://"), "/api", fields)
		if code == http.StatusOK || up.calls.Load() != 0 {
			t.Fatalf("%v: status %d, upstream calls %d", fields, code, up.calls.Load())
		}
	}
	// The same connection-free request is forwarded, as alice.
	if code := rawhttptest.Get2(t, strings.TrimPrefix(srv.URL, "https://"), "/api", nil); code != http.StatusOK || up.calls.Load() != 1 {
		t.Fatalf("plain HTTP/2 request: status %d, upstream calls %d", code, up.calls.Load())
	}
	if got := up.last.Load().Get("Impersonate-User"); got != "alice" {
		t.Fatalf("HTTP/2 request reached the API server as %q", got)
	}
}

// recordUpstream is an API server reached without a network: it keeps the
// headers of every request that would have been sent.
type recordUpstream struct {
	mu   sync.Mutex
	seen []http.Header
}

func (r *recordUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Header.Clone())
	r.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// FuzzProxySendsOnlyItsIdentity: for any request a client can send (any
// method, path, headers and HTTP/1.x version, parsed as the server parses
// it), a request that reaches the API server carries exactly the proxy's
// identity headers for the authenticated user, and no header of the
// client's that claims an identity. useToken authenticates alice by a real
// proxy token sent first, instead of a certificate; a TokenReview that
// would accept any token stands behind it, so a proxy token that went
// there would be forwarded and show.
func FuzzProxySendsOnlyItsIdentity(f *testing.F) {
	for _, seed := range []string{
		"Connection: Impersonate-User",
		"Connection: impersonate-user, IMPERSONATE-GROUP\nConnection: keep-alive",
		"Connection: Impersonate-Extra-Original-User-Info.impersonation-Proxy.concierge.pinniped.dev",
		"Connection: ,Authorization,\nAuthorization: Bearer stolen",
		"Proxy-Connection: Impersonate-User\nKeep-Alive: timeout=1, Impersonate-Group",
		"Upgrade: websocket\nConnection: Upgrade, Impersonate-User",
		"TE: trailers\nConnection: TE",
		"X-Remote-User: admin\nX_Remote_Group: system:masters\nx-forwarded-for: 1.2.3.4",
		"Impersonate-User: admin\nImpersonate-User: alice",
		"Impersonate-Extra-Scopes: all",
		"Transfer-Encoding: chunked",
		"Content-Length: 0\nConnection: close",
		"authorization: Bearer stolen\nAUTHORIZATION: bearer x.y.z",
		" stolen",
		"Impersonate-Extra-Authentication.kubernetes.io%2fcredential-Id: JTI=forged",
	} {
		for _, useToken := range []bool{false, true} {
			f.Add("GET", "/api/v1/pods", seed, false, false, useToken)
			f.Add("POST", "/apis/x", seed, true, false, useToken)
			f.Add("GET", "/api/v1/pods", seed+"\nImpersonate-User: bob\nImpersonate-Group: ops", false, true, useToken)
		}
	}
	up := &recordUpstream{}
	alice := fixedAuthn{u: &user.DefaultInfo{Name: "alice", Groups: []string{"devs", "system:authenticated"},
		Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"X509SHA256=abc"}}}}
	key := newKey(f)
	tokens := &impersonator.ProxyTokens{}
	tokens.Set(keySet(key), testAudience)
	// Valid for as long as anyone fuzzes.
	tok, jti := signFor(f, key, testAudience, "alice", 7*24*time.Hour, time.Now())
	wantIdentity := map[bool]http.Header{false: aliceIdentity, true: aliceTokenIdentity(jti)}
	// The API server also reads a bearer token from a WebSocket subprotocol.
	wsTok := base64.RawURLEncoding.EncodeToString([]byte(tok))
	for _, seed := range []string{
		"Sec-WebSocket-Protocol: base64url.bearer.authorization.k8s.io." + wsTok,
		"Upgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Protocol: v5.channel.k8s.io, base64url.bearer.authorization.k8s.io." + wsTok,
	} {
		for _, useToken := range []bool{false, true} {
			f.Add("GET", "/api/v1/pods", seed, false, false, useToken)
		}
	}
	// For each way in, two proxies: one that refuses alice's nested
	// impersonation, and one that allows it, so client-chosen Impersonate-*
	// values are re-emitted.
	type mode struct{ nested, useToken bool }
	proxies := map[mode]*impersonator.Proxy{}
	for _, allow := range []bool{false, true} {
		p := &impersonator.Proxy{Log: slog.New(slog.DiscardHandler), Upstream: &url.URL{Scheme: "https", Host: "kube-apiserver"}, Transport: up, UpgradeTransport: up,
			ImpersonatorToken: &fakeImpersonatorToken{}, Authn: alice, Authz: policy{allow: allow}}
		p.Init()
		proxies[mode{allow, false}] = p
		p = &impersonator.Proxy{Log: slog.New(slog.DiscardHandler), Upstream: &url.URL{Scheme: "https", Host: "kube-apiserver"}, Transport: up, UpgradeTransport: up,
			ImpersonatorToken: &fakeImpersonatorToken{}, DirectTransport: up, DirectUpgradeTransport: up,
			Authn: noCert{}, Tokens: acceptAnyToken{&atomic.Int64{}}, ProxyTokens: tokens, Authz: policy{allow: allow}}
		p.Init()
		proxies[mode{allow, true}] = p
	}
	f.Fuzz(func(t *testing.T, method, path, headers string, http10, nested, useToken bool) {
		p := proxies[mode{nested, useToken}]
		want := wantIdentity[useToken]
		proto := "HTTP/1.1"
		if http10 {
			proto = "HTTP/1.0"
		}
		var raw strings.Builder
		raw.WriteString(method + " " + path + " " + proto + "\r\nHost: x\r\n")
		if useToken {
			raw.WriteString("Authorization: Bearer " + tok + "\r\n")
		}
		for line := range strings.SplitSeq(headers, "\n") {
			raw.WriteString(strings.TrimSuffix(line, "\r") + "\r\n")
		}
		raw.WriteString("\r\n")
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw.String())))
		if err != nil {
			return // the server answers 400 itself; nothing reaches the proxy
		}
		req.RemoteAddr = "192.0.2.1:1234"
		up.mu.Lock()
		up.seen = nil
		up.mu.Unlock()
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		up.mu.Lock()
		defer up.mu.Unlock()
		for _, h := range up.seen {
			id := identityOf(h)
			if sent := fmt.Sprint(h); strings.Contains(sent, tok) || strings.Contains(sent, wsTok) {
				t.Fatalf("request %q reached the API server with the proxy token", raw.String())
			}
			if !nested && !sameIdentity(id, want) {
				t.Fatalf("request %q reached the API server with identity headers %v, want exactly %v", raw.String(), id, want)
			}
			// Allowed to impersonate, alice may choose whom; the proxy
			// still names her as the one who asked, and no header of hers
			// but the Impersonate-* ones it re-emits gets through.
			asHerself := id.Get("Impersonate-User") == "alice" && sameIdentity(id, want)
			if nested && !asHerself && (id.Get("Impersonate-User") == "" || !strings.Contains(id.Get(originalUserHeader), `"alice"`) ||
				!slices.Equal(id.Values("Authorization"), []string{"Bearer " + impersonatorToken}) || id.Get("X-Remote-User") != "") {
				t.Fatalf("request %q reached the API server with identity headers %v", raw.String(), id)
			}
		}
		// Every answer is the proxy's own decision: refused (400, 401,
		// 403) or sent once. A 500 is the last check catching identity
		// headers the proxy failed to set as decided: a bug, even though
		// nothing wrong was sent.
		switch rec.Code {
		case http.StatusOK:
			if len(up.seen) != 1 {
				t.Fatalf("request %q answered 200 without reaching the API server once (%d)", raw.String(), len(up.seen))
			}
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
		default:
			t.Fatalf("request %q answered %d: %s", raw.String(), rec.Code, rec.Body.String())
		}
	})
}

// acceptAnyToken is a TokenReview that would accept any bearer token, and
// counts its calls: a proxy token that reached it would show, and so would
// a proxy token forwarded upstream after it.
type acceptAnyToken struct{ calls *atomic.Int64 }

func (a acceptAnyToken) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if r.Header.Get("Authorization") == "" {
		return nil, false, nil
	}
	a.calls.Add(1)
	return &authenticator.Response{User: &user.DefaultInfo{Name: "system:serviceaccount:ci:builder"}}, true, nil
}

// tokenProxy is a proxy for clients without certificates: real proxy token
// keys, and acceptAnyToken behind them. tok is alice's token.
func tokenProxy(t *testing.T) (p *impersonator.Proxy, up *upstream, reviews *atomic.Int64, tok, jti string) {
	t.Helper()
	up, reviews = &upstream{}, &atomic.Int64{}
	u, tr := shippedTransports(t, up)
	key := newKey(t)
	tokens := &impersonator.ProxyTokens{}
	tokens.Set(keySet(key), testAudience)
	p = &impersonator.Proxy{
		Log:      slog.New(slog.DiscardHandler),
		Upstream: u, Transport: tr.Impersonating, UpgradeTransport: tr.ImpersonatingUpgrade, ImpersonatorToken: &fakeImpersonatorToken{},
		DirectTransport: tr.Direct, DirectUpgradeTransport: tr.DirectUpgrade,
		Authn: noCert{}, Tokens: acceptAnyToken{reviews}, ProxyTokens: tokens, Authz: policy{allow: false},
	}
	p.Init()
	tok, jti = signFor(t, key, testAudience, "alice", time.Hour, time.Now())
	return p, up, reviews, tok, jti
}

// TestConnectionHeaderCannotRemoveTheProxysIdentityForTokens: the
// hop-by-hop tricks of TestConnectionHeaderCannotRemoveTheProxysIdentity,
// with alice authenticated by a proxy token in raw HTTP/1.x: the token
// never reaches TokenReview or the API server, and whatever is forwarded
// carries exactly the proxy's identity headers for her.
func TestConnectionHeaderCannotRemoveTheProxysIdentityForTokens(t *testing.T) {
	p, up, reviews, tok, jti := tokenProxy(t)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	const refused, unauthorized, forwarded, notForwarded = 400, 401, 200, -1
	for _, c := range []struct {
		name    string
		proto   string
		headers string
		want    int
	}{
		{"Connection names Authorization", "HTTP/1.1", "Authorization: Bearer " + tok + "\r\nConnection: Authorization\r\n", refused},
		{"Connection names it in lower case", "HTTP/1.1", "Authorization: Bearer " + tok + "\r\nconnection: keep-alive, authorization\r\n", refused},
		{"Connection names the user", "HTTP/1.1", "Authorization: Bearer " + tok + "\r\nConnection: Impersonate-User\r\n", refused},
		{"HTTP/1.0 naming Authorization", "HTTP/1.0", "Authorization: Bearer " + tok + "\r\nConnection: Authorization, keep-alive\r\n", refused},
		{"plain", "HTTP/1.1", "Authorization: Bearer " + tok + "\r\n", forwarded},
		{"header name in lower case", "HTTP/1.1", "authorization: bearer " + tok + "\r\n", forwarded},
		{"header name in upper case", "HTTP/1.1", "AUTHORIZATION: BEARER " + tok + "\r\n", forwarded},
		{"trailing spaces", "HTTP/1.1", "Authorization: Bearer " + tok + "  \t \r\n", forwarded},
		{"ours, then a stolen token", "HTTP/1.1", "Authorization: Bearer " + tok + "\r\nAuthorization: Bearer stolen\r\n", forwarded},
		{"ours, then a stolen token in another case", "HTTP/1.1", "Authorization: Bearer " + tok + "\r\nauthorization: Bearer stolen\r\n", forwarded},
		{"HTTP/1.0", "HTTP/1.0", "Authorization: Bearer " + tok + "\r\n", forwarded},
		{"HTTP/1.0 keep-alive", "HTTP/1.0", "Connection: keep-alive\r\nAuthorization: Bearer " + tok + "\r\n", forwarded},
		{"comma-joined with another token", "HTTP/1.1", "Authorization: Bearer " + tok + ", Bearer stolen\r\n", unauthorized},
		{"a stolen token with ours after it", "HTTP/1.1", "Authorization: Bearer stolen " + tok + "\r\n", unauthorized},
		{"a folded continuation line", "HTTP/1.1", "Authorization: Bearer " + tok + "\r\n stolen\r\n", notForwarded},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := up.calls.Load()
			got := rawRequest(t, addr, "GET /api/v1/namespaces "+c.proto+"\r\nHost: x\r\n"+c.headers+"\r\n")
			if reviews.Load() != 0 {
				t.Fatal("a proxy token was sent to TokenReview")
			}
			if c.want != forwarded {
				if got == http.StatusOK || (c.want != notForwarded && got != c.want) {
					t.Fatalf("status %d, want %d", got, c.want)
				}
				if up.calls.Load() != before {
					t.Fatal("the request reached the API server")
				}
				return
			}
			if got != http.StatusOK || up.calls.Load() != before+1 {
				t.Fatalf("status %d, upstream calls %d: the request was not forwarded", got, up.calls.Load()-before)
			}
			if id := identityOf(*up.last.Load()); !sameIdentity(id, aliceTokenIdentity(jti)) {
				t.Fatalf("the API server saw identity headers %v, want exactly %v", id, aliceTokenIdentity(jti))
			}
		})
	}
	// The first Authorization decides, as at the API server: a stolen
	// token first is the TokenReview's, and goes upstream alone.
	if got := rawRequest(t, addr, "GET /api HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer stolen\r\nAuthorization: Bearer "+tok+"\r\n\r\n"); got != http.StatusOK {
		t.Fatalf("a stolen token first: status %d", got)
	}
	if h := *up.last.Load(); !slices.Equal(h.Values("Authorization"), []string{"Bearer stolen"}) || h.Get("Impersonate-User") != "" {
		t.Fatalf("a stolen token first: the API server saw %v", h)
	}
}

// TestHTTP2ConnectionHeaderIsRefusedForTokens: the raw HTTP/2 tricks, with
// alice authenticated by a proxy token.
func TestHTTP2ConnectionHeaderIsRefusedForTokens(t *testing.T) {
	p, up, reviews, tok, jti := tokenProxy(t)
	srv := httptest.NewUnstartedServer(p)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "https://")
	auth := hpack.HeaderField{Name: "authorization", Value: "Bearer " + tok}

	for _, fields := range [][]hpack.HeaderField{
		{auth, {Name: "connection", Value: "authorization"}},
		{{Name: "connection", Value: "keep-alive, authorization"}, auth},
		{auth, {Name: "connection", Value: "impersonate-user"}},
		{{Name: "Authorization", Value: "Bearer " + tok}}, // HTTP/2 field names are lower case
	} {
		if code := rawhttptest.Get2(t, addr, "/api", fields); code == http.StatusOK || up.calls.Load() != 0 {
			t.Fatalf("%v: status %d, upstream calls %d", fields, code, up.calls.Load())
		}
	}
	for i, fields := range [][]hpack.HeaderField{
		{auth},
		{{Name: "authorization", Value: "bearer " + tok}, {Name: "authorization", Value: "Bearer stolen"}},
	} {
		if code := rawhttptest.Get2(t, addr, "/api", fields); code != http.StatusOK || up.calls.Load() != int64(i+1) {
			t.Fatalf("%v: status %d, upstream calls %d", fields, code, up.calls.Load())
		}
		if id := identityOf(*up.last.Load()); !sameIdentity(id, aliceTokenIdentity(jti)) {
			t.Fatalf("the API server saw identity headers %v, want exactly %v", id, aliceTokenIdentity(jti))
		}
	}
	if reviews.Load() != 0 {
		t.Fatal("a proxy token was sent to TokenReview")
	}
}
