package impersonator_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
	"github.com/pinniped-kit/pinniped/agent/plumbing/observe"
)

var testAudience = proxytoken.ForInstall("test-install")

// aliceTokenIdentity is exactly what the API server must see for alice's
// proxy token: the proxy's headers, naming the token by its jti.
func aliceTokenIdentity(jti string) http.Header {
	return http.Header{
		"Authorization":     {"Bearer " + impersonatorToken},
		"Impersonate-User":  {"alice"},
		"Impersonate-Group": {"devs"},
		"Impersonate-Extra-Authentication.kubernetes.io%2fcredential-Id": {"JTI=" + jti},
	}
}

func newKey(t testing.TB) *proxytoken.Key {
	t.Helper()
	k, err := proxytoken.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keySet(keys ...*proxytoken.Key) *proxytoken.KeySet {
	ks := &proxytoken.KeySet{Signing: keys[0], Verify: map[string]*ecdsa.PublicKey{}}
	for _, k := range keys {
		ks.Verify[k.ID] = &k.Private.PublicKey
	}
	return ks
}

// signFor makes a real proxy token for name (group devs), valid from now
// for ttl.
func signFor(t testing.TB, k *proxytoken.Key, a proxytoken.Audience, name string, ttl time.Duration, now time.Time) (tok, jti string) {
	t.Helper()
	tok, _, jti, err := proxytoken.Sign(k, a, &user.DefaultInfo{Name: name, Groups: []string{"devs"}}, ttl, now)
	if err != nil {
		t.Fatal(err)
	}
	return tok, jti
}

// serviceAccountJWT is shaped like a ServiceAccount token (typ JWT): not
// ours, so it is the TokenReview's to decide.
var serviceAccountJWT = strings.Join([]string{
	base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"sa","typ":"JWT"}`)),
	base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:ci:builder"}`)),
	base64.RawURLEncoding.EncodeToString([]byte("signature")),
}, ".")

// lockedBuffer collects the proxy's log lines from the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tokenBed is the proxy over TLS (HTTP/2, client certificates requested)
// with the agent's certificate authenticator, a TokenReview that counts its
// calls, and real proxy token keys, in front of a recording API server.
type tokenBed struct {
	srv      *httptest.Server
	up       *upstream
	used     *atomic.Pointer[string]
	reviews  *atomic.Int64
	key      *proxytoken.Key
	tokens   *impersonator.ProxyTokens
	signer   *certauthority.CA
	stranger *certauthority.CA
	logs     *lockedBuffer

	mu  sync.Mutex
	obs []observe.ProxyRequest
}

func newTokenBed(t *testing.T, allowNested bool) *tokenBed {
	t.Helper()
	return newTokenBedWith(t, allowNested, true)
}

// newTokenBedWith is newTokenBed; without proxyTokens the Proxy has no
// ProxyTokens at all (b.tokens is then unused).
func newTokenBedWith(t *testing.T, allowNested, proxyTokens bool) *tokenBed {
	t.Helper()
	b := &tokenBed{up: &upstream{}, used: &atomic.Pointer[string]{}, reviews: &atomic.Int64{}, key: newKey(t),
		tokens: &impersonator.ProxyTokens{}, logs: &lockedBuffer{}}
	b.tokens.Set(keySet(b.key), testAudience)
	var err error
	if b.signer, err = certauthority.New("signer", time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	if b.stranger, err = certauthority.New("stranger", time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	cas := &impersonator.ClientCAs{}
	cas.Set(b.signer.CertPEM())

	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		b.reviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == serviceAccountJWT {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: "system:serviceaccount:ci:builder", UID: "u-1"}}
		}
		return true, tr, nil
	})

	upSrv := httptest.NewServer(b.up)
	t.Cleanup(upSrv.Close)
	u, _ := url.Parse(upSrv.URL)
	p := &impersonator.Proxy{
		Upstream: u, Transport: recordingTransport{"agent", b.used}, UpgradeTransport: &http.Transport{}, ImpersonatorToken: &fakeImpersonatorToken{},
		DirectTransport: recordingTransport{"direct", b.used}, DirectUpgradeTransport: &http.Transport{},
		Authn: impersonator.NewCertAuthenticator(cas), Tokens: impersonator.NewTokenAuthenticator(client.AuthenticationV1()),
		ProxyTokens: b.tokens, Authz: policy{allow: allowNested},
		Log: slog.New(slog.NewTextHandler(b.logs, nil)),
		Observe: func(o observe.ProxyRequest) {
			b.mu.Lock()
			b.obs = append(b.obs, o)
			b.mu.Unlock()
		},
	}
	if !proxyTokens {
		p.ProxyTokens = nil
	}
	p.Init()
	b.srv = httptest.NewUnstartedServer(p)
	b.srv.EnableHTTP2 = true
	b.srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	b.srv.StartTLS()
	t.Cleanup(b.srv.Close)
	return b
}

// do sends GET /api with the given Authorization lines (in order) and
// other headers, presenting cert when it is not nil; it returns the status.
func (b *tokenBed) do(t *testing.T, cert *certauthority.CA, auth []string, headers map[string][]string) int {
	t.Helper()
	cfg := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	cfg.RootCAs.AddCert(b.srv.Certificate())
	if cert != nil {
		issued, err := cert.IssueClientCert("carol", "", []string{"qa"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		pair, _ := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
		cfg.Certificates = []tls.Certificate{pair}
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, b.srv.URL+"/api", nil)
	for _, a := range auth {
		req.Header.Add("Authorization", a)
	}
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func (b *tokenBed) lastObservation() observe.ProxyRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.obs[len(b.obs)-1]
}

// TestProxyTokenIsImpersonated: the API server sees exactly the token
// user's impersonation headers, sent with the agent's credentials, and never
// the token; TokenReview is never asked.
func TestProxyTokenIsImpersonated(t *testing.T) {
	b := newTokenBed(t, false)
	tok, jti := signFor(t, b.key, testAudience, "alice", 5*time.Minute, time.Now())
	smuggled := map[string][]string{"X-Remote-User": {"admin"}, "Impersonate-Extra-Authentication.kubernetes.io%2fcredential-Id": {"JTI=forged"}}
	for i := range 3 { // the later ones come from the cache
		if code := b.do(t, nil, []string{"Bearer " + tok}, nil); code != http.StatusOK {
			t.Fatalf("request %d: status %d", i, code)
		}
		if id := identityOf(*b.up.last.Load()); !sameIdentity(id, aliceTokenIdentity(jti)) {
			t.Fatalf("request %d: the API server saw identity headers %v, want exactly %v", i, id, aliceTokenIdentity(jti))
		}
		if *b.used.Load() != "agent" {
			t.Fatalf("request %d went via the %s transport", i, *b.used.Load())
		}
	}
	// A client's own identity headers next to the token are denied as a
	// nested impersonation (not allowed here), never sent.
	calls := b.up.calls.Load()
	if code := b.do(t, nil, []string{"Bearer " + tok}, smuggled); code != http.StatusForbidden || b.up.calls.Load() != calls {
		t.Fatalf("smuggled extra: status %d", code)
	}
	if n := b.reviews.Load(); n != 0 {
		t.Fatalf("TokenReview was asked %d times about a proxy token", n)
	}
	if o := b.lastObservation(); o.Method != observe.MethodProxyToken || o.Username != "alice" {
		t.Fatalf("observation %+v", o)
	}
	if strings.Contains(b.logs.String(), tok) {
		t.Fatal("the proxy logged a token")
	}
}

// TestProxyTokenNestedImpersonation: kubectl --as works for a token user as
// for a certificate user, with the real user recorded.
func TestProxyTokenNestedImpersonation(t *testing.T) {
	b := newTokenBed(t, true)
	tok, jti := signFor(t, b.key, testAudience, "alice", 5*time.Minute, time.Now())
	if code := b.do(t, nil, []string{"Bearer " + tok}, map[string][]string{"Impersonate-User": {"bob"}}); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	h := *b.up.last.Load()
	if h.Get("Impersonate-User") != "bob" || !slices.Equal(h.Values("Authorization"), []string{"Bearer " + impersonatorToken}) || *b.used.Load() != "agent" {
		t.Fatalf("the API server saw %v via %s", h, *b.used.Load())
	}
	if o := h.Get(originalUserHeader); !strings.Contains(o, `"alice"`) || !strings.Contains(o, "JTI="+jti) {
		t.Fatalf("original user: %q", o)
	}
}

// TestProxyTokenRefusals: a token of ours that does not verify is refused
// by the proxy itself: never reviewed, never forwarded, and the log says why
// without the token or the name in it.
func TestProxyTokenRefusals(t *testing.T) {
	b := newTokenBed(t, false)
	now := time.Now()
	good, _ := signFor(t, b.key, testAudience, "mallory", 5*time.Minute, now)
	other, _ := signFor(t, b.key, testAudience, "alice", 5*time.Minute, now)
	expired, _ := signFor(t, b.key, testAudience, "mallory", time.Minute, now.Add(-2*time.Minute))
	early, _ := signFor(t, b.key, testAudience, "mallory", time.Hour, now.Add(time.Hour))
	otherKey, _ := signFor(t, newKey(t), testAudience, "mallory", 5*time.Minute, now)
	otherInstall, _ := signFor(t, b.key, proxytoken.ForInstall("another-install"), "mallory", 5*time.Minute, now)
	// alice's signature over mallory's claims.
	g, o := strings.Split(good, "."), strings.Split(other, ".")
	swapped := g[0] + "." + g[1] + "." + o[2]
	for name, auth := range map[string][]string{
		"expired":                     {"Bearer " + expired},
		"not yet valid":               {"Bearer " + early},
		"signed by another key":       {"Bearer " + otherKey},
		"another installation":        {"Bearer " + otherInstall},
		"signature of another token":  {"Bearer " + swapped},
		"truncated":                   {"Bearer " + good[:len(good)-10]},
		"a second word":               {"Bearer " + good + " more"},
		"behind a ServiceAccount JWT": {"Bearer " + serviceAccountJWT + " " + good},
		"behind another word":         {"Bearer sa-token " + good},
	} {
		t.Run(name, func(t *testing.T) {
			calls := b.up.calls.Load()
			if code := b.do(t, nil, auth, nil); code != http.StatusUnauthorized {
				t.Fatalf("status %d", code)
			}
			if b.up.calls.Load() != calls {
				t.Fatal("the request reached the API server")
			}
			if n := b.reviews.Load(); n != 0 {
				t.Fatalf("TokenReview was asked %d times", n)
			}
		})
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "refused a proxy token") || !strings.Contains(logs, "reason=expired") || !strings.Contains(logs, "remote=") {
		t.Fatalf("the refusals were not logged with a reason: %s", logs)
	}
	for _, secret := range []string{"mallory", g[1], g[2], o[2]} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log names the token or its user: %s", logs)
		}
	}
}

// TestServiceAccountJWTStillGoesToTokenReview: a bearer token that is not
// ours is the API server's to decide, and goes upstream as it came.
func TestServiceAccountJWTStillGoesToTokenReview(t *testing.T) {
	b := newTokenBed(t, false)
	if code := b.do(t, nil, []string{"Bearer " + serviceAccountJWT}, nil); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	h := *b.up.last.Load()
	if *b.used.Load() != "direct" || !slices.Equal(h.Values("Authorization"), []string{"Bearer " + serviceAccountJWT}) || h.Get("Impersonate-User") != "" {
		t.Fatalf("a ServiceAccount token went via %s with %v", *b.used.Load(), h)
	}
	if n := b.reviews.Load(); n != 1 {
		t.Fatalf("TokenReview asked %d times, want 1", n)
	}
	if o := b.lastObservation(); o.Method != observe.MethodToken {
		t.Fatalf("observation %+v", o)
	}
}

// TestCertificateWinsOverProxyToken: with a client certificate, a proxy
// token is neither used nor forwarded; an untrusted certificate is refused
// even next to a good token.
func TestCertificateWinsOverProxyToken(t *testing.T) {
	b := newTokenBed(t, false)
	tok, jti := signFor(t, b.key, testAudience, "alice", 5*time.Minute, time.Now())
	if code := b.do(t, b.signer, []string{"Bearer " + tok}, nil); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	h := *b.up.last.Load()
	if h.Get("Impersonate-User") != "carol" || !slices.Equal(h.Values("Authorization"), []string{"Bearer " + impersonatorToken}) || strings.Contains(strings.Join(identityOf(h).Values("Impersonate-Extra-Authentication.kubernetes.io%2fcredential-Id"), ","), jti) {
		t.Fatalf("the API server saw %v", h)
	}
	if o := b.lastObservation(); o.Method != observe.MethodCertificate {
		t.Fatalf("observation %+v", o)
	}
	calls := b.up.calls.Load()
	if code := b.do(t, b.stranger, []string{"Bearer " + tok}, nil); code != http.StatusUnauthorized || b.up.calls.Load() != calls {
		t.Fatalf("another CA's certificate with a good token: status %d, upstream calls %d", code, b.up.calls.Load()-calls)
	}
	if n := b.reviews.Load(); n != 0 {
		t.Fatalf("TokenReview was asked %d times", n)
	}
}

// TestProxyTokenHeaderTricks: the spellings and orders of Authorization
// an attacker controls never send a proxy token to TokenReview or upstream,
// and never lose the proxy's identity headers.
func TestProxyTokenHeaderTricks(t *testing.T) {
	b := newTokenBed(t, false)
	tok, jti := signFor(t, b.key, testAudience, "alice", 5*time.Minute, time.Now())
	for _, c := range []struct {
		name string
		auth []string
	}{
		{"lower-case bearer", []string{"bearer " + tok}},
		{"upper-case bearer", []string{"BEARER " + tok}},
		{"mixed-case bearer", []string{"BeArEr " + tok}},
		{"trailing spaces", []string{"Bearer " + tok + "   "}},
		{"extra spaces before the token", []string{"Bearer    " + tok}},
		{"ours first, a ServiceAccount token second", []string{"Bearer " + tok, "Bearer " + serviceAccountJWT}},
		{"ours twice", []string{"Bearer " + tok, "Bearer " + tok}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if code := b.do(t, nil, c.auth, nil); code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			if id := identityOf(*b.up.last.Load()); !sameIdentity(id, aliceTokenIdentity(jti)) || *b.used.Load() != "agent" {
				t.Fatalf("the API server saw %v via %s, want exactly %v", id, *b.used.Load(), aliceTokenIdentity(jti))
			}
		})
	}
	if n := b.reviews.Load(); n != 0 {
		t.Fatalf("TokenReview was asked %d times", n)
	}
	// The first Authorization decides, as at the API server: a
	// ServiceAccount token first goes direct, alone.
	if code := b.do(t, nil, []string{"Bearer " + serviceAccountJWT, "Bearer " + tok}, nil); code != http.StatusOK {
		t.Fatalf("ServiceAccount token first: status %d", code)
	}
	if h := *b.up.last.Load(); !slices.Equal(h.Values("Authorization"), []string{"Bearer " + serviceAccountJWT}) || *b.used.Load() != "direct" {
		t.Fatalf("ServiceAccount token first: the API server saw %v via %s", h, *b.used.Load())
	}
	// Not a bearer token at all: stripped like any Authorization.
	if code := b.do(t, nil, []string{"Bearer\t" + tok}, nil); code != http.StatusOK {
		t.Fatalf("tab after Bearer: status %d", code)
	}
	if h := *b.up.last.Load(); h.Get("Authorization") != "" || h.Get("Impersonate-User") != "" || *b.used.Load() != "direct" {
		t.Fatalf("tab after Bearer: the API server saw %v via %s", h, *b.used.Load())
	}
}

// TestProxyTokenKeyRotation: once the keys change, what was verified with
// the old ones is verified again: a retired key stops working at once.
func TestProxyTokenKeyRotation(t *testing.T) {
	b := newTokenBed(t, false)
	tok, _ := signFor(t, b.key, testAudience, "alice", 5*time.Minute, time.Now())
	if code := b.do(t, nil, []string{"Bearer " + tok}, nil); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	next := newKey(t)
	b.tokens.Set(keySet(next, b.key), testAudience) // both verify
	if code := b.do(t, nil, []string{"Bearer " + tok}, nil); code != http.StatusOK {
		t.Fatalf("while both keys verify: status %d", code)
	}
	b.tokens.Set(keySet(next), testAudience) // the old key is retired
	calls := b.up.calls.Load()
	if code := b.do(t, nil, []string{"Bearer " + tok}, nil); code != http.StatusUnauthorized || b.up.calls.Load() != calls {
		t.Fatalf("a token of a retired key: status %d", code)
	}
	b.tokens.Set(nil, testAudience)
	fresh, _ := signFor(t, next, testAudience, "alice", 5*time.Minute, time.Now())
	if code := b.do(t, nil, []string{"Bearer " + fresh}, nil); code != http.StatusUnauthorized || b.reviews.Load() != 0 {
		t.Fatalf("without keys: status %d, reviews %d", code, b.reviews.Load())
	}
}

// TestProxyTokensCache: the verification cache at the authenticator,
// under a controlled clock.
func TestProxyTokensCache(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	k1, k2 := newKey(t), newKey(t)
	p := &impersonator.ProxyTokens{Now: func() time.Time { return now }}
	authn := func(tok string) bool {
		t.Helper()
		resp, ours, err := p.AuthenticateProxyToken(tok)
		if !ours {
			t.Fatal("a proxy token was not recognized as ours")
		}
		return err == nil && resp != nil && resp.User.GetName() == "alice"
	}
	short, _ := signFor(t, k1, testAudience, "alice", 30*time.Second, t0)
	long, _ := signFor(t, k1, testAudience, "alice", time.Hour, t0)

	if authn(long) {
		t.Fatal("accepted before any keys were set")
	}
	p.Set(keySet(k1), testAudience)
	if !authn(short) || !authn(long) {
		t.Fatal("refused good tokens")
	}
	// A cached verification is reused (Verify itself would refuse a token
	// before its nbf), even across a Set with the same keys...
	p.Set(keySet(k1), testAudience)
	now = t0.Add(-time.Hour)
	if !authn(long) {
		t.Fatal("an unchanged key set dropped the cache")
	}
	// ...but never past the token's own exp, though the cache's TTL is a
	// minute.
	now = t0.Add(31 * time.Second)
	if authn(short) {
		t.Fatal("a token was accepted past its exp")
	}
	if !authn(long) {
		t.Fatal("refused a good token")
	}
	// Another audience, or the signing key gone: verified again, refused.
	p.Set(keySet(k1), proxytoken.ForInstall("another-install"))
	if authn(long) {
		t.Fatal("accepted from the cache under another audience")
	}
	p.Set(keySet(k1), testAudience)
	if !authn(long) {
		t.Fatal("refused a good token")
	}
	p.Set(keySet(k2), testAudience)
	if authn(long) {
		t.Fatal("accepted from the cache after its key was retired")
	}
	// The key set given to Set is copied: changing it later changes nothing.
	ks := keySet(k1)
	p.Set(ks, testAudience)
	if !authn(long) {
		t.Fatal("refused a good token")
	}
	delete(ks.Verify, k1.ID)
	ks.Verify[k2.ID] = &k2.Private.PublicKey
	now = now.Add(2 * time.Minute) // past the cache's TTL: verified again
	if !authn(long) {
		t.Fatal("a change of the caller's map reached the authenticator")
	}

	if _, ours, err := p.AuthenticateProxyToken(serviceAccountJWT); ours || err != nil {
		t.Fatalf("a ServiceAccount JWT: ours %v, %v", ours, err)
	}
}

// TestProxyTokenInWebSocketProtocolIsNeverForwarded: the API server also
// reads a bearer token from a WebSocket subprotocol
// (base64url.bearer.authorization.k8s.io.<token>) and hands it to its token
// authenticators, webhooks included. A token of ours there is refused by
// the proxy, whatever else the request carries, and never leaves it.
func TestProxyTokenInWebSocketProtocolIsNeverForwarded(t *testing.T) {
	b := newTokenBed(t, false)
	tok, _ := signFor(t, b.key, testAudience, "alice", 5*time.Minute, time.Now())
	proto := "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte(tok))
	for _, c := range []struct {
		name string
		cert bool
		auth []string
		h    map[string][]string
	}{
		{name: "anonymous", h: map[string][]string{"Sec-Websocket-Protocol": {proto + ", v5.channel.k8s.io"}}},
		{name: "second protocol line", h: map[string][]string{"Sec-Websocket-Protocol": {"v5.channel.k8s.io", " " + proto + " "}}},
		{name: "with a ServiceAccount token", auth: []string{"Bearer " + serviceAccountJWT}, h: map[string][]string{"Sec-Websocket-Protocol": {proto}}},
		{name: "with the token in Authorization too", auth: []string{"Bearer " + tok}, h: map[string][]string{"Sec-Websocket-Protocol": {proto}}},
		{name: "with a certificate", cert: true, h: map[string][]string{"Sec-Websocket-Protocol": {proto}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cert *certauthority.CA
			if c.cert {
				cert = b.signer
			}
			calls := b.up.calls.Load()
			if code := b.do(t, cert, c.auth, c.h); code != http.StatusUnauthorized || b.up.calls.Load() != calls {
				t.Fatalf("status %d, upstream calls %d: a proxy token in a subprotocol was forwarded", code, b.up.calls.Load()-calls)
			}
		})
	}
	if n := b.reviews.Load(); n != 0 {
		t.Fatalf("TokenReview was asked %d times", n)
	}
	// Other subprotocols, and a ServiceAccount token in one, are the API
	// server's as before.
	sa := "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte(serviceAccountJWT))
	if code := b.do(t, nil, nil, map[string][]string{"Sec-Websocket-Protocol": {sa + ", v5.channel.k8s.io"}}); code != http.StatusOK {
		t.Fatalf("a ServiceAccount token in a subprotocol: status %d", code)
	}
	if got := b.up.last.Load().Get("Sec-Websocket-Protocol"); got != sa+", v5.channel.k8s.io" {
		t.Fatalf("the API server saw subprotocols %q", got)
	}
}

// TestProxyTokenWithoutProxyTokensIsNotReviewed: a proxy without
// ProxyTokens (one that hands out certificates) still never sends a token
// of ours to TokenReview, which would show it to the API server's token
// authenticators, nor forwards it; ServiceAccount tokens work as before.
func TestProxyTokenWithoutProxyTokensIsNotReviewed(t *testing.T) {
	b := newTokenBedWith(t, false, false)
	tok, _ := signFor(t, b.key, testAudience, "alice", 5*time.Minute, time.Now())
	if code := b.do(t, nil, []string{"Bearer " + tok}, nil); code != http.StatusUnauthorized || b.up.calls.Load() != 0 {
		t.Fatalf("status %d, upstream calls %d", code, b.up.calls.Load())
	}
	if n := b.reviews.Load(); n != 0 {
		t.Fatalf("TokenReview was asked %d times about a proxy token", n)
	}
	if code := b.do(t, nil, []string{"Bearer " + serviceAccountJWT}, nil); code != http.StatusOK || *b.used.Load() != "direct" {
		t.Fatalf("a ServiceAccount token: status %d", code)
	}
}

// TestProxyTokenCannotCarryTheOriginalUser: the extra in which the proxy
// records the real user of a nested impersonation (of any API group
// suffix) is the proxy's to set; a token that carries one is refused, so
// audit tooling cannot be told a forged "original user".
func TestProxyTokenCannotCarryTheOriginalUser(t *testing.T) {
	b := newTokenBed(t, false)
	for _, key := range []string{impersonator.OriginalUserExtra, "Original-User-Info.impersonation-proxy.concierge.example.io"} {
		u := &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}, Extra: map[string][]string{key: {`{"username":"ceo"}`}}}
		tok, _, _, err := proxytoken.Sign(b.key, testAudience, u, 5*time.Minute, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if code := b.do(t, nil, []string{"Bearer " + tok}, nil); code != http.StatusUnauthorized || b.up.calls.Load() != 0 {
			t.Fatalf("%s: status %d, upstream calls %d", key, code, b.up.calls.Load())
		}
	}
}

// TestProxyTokenExtrasReachTheAPIServer: extras whose keys hold bytes a
// header name may not (':', '=', '@', '/', '%', a space) are sent escaped
// as client-go escapes them, and the API server's unescaping gives back
// each key exactly; before, Go's transport refused such a header and every
// request of the user failed as "could not reach the API server".
func TestProxyTokenExtrasReachTheAPIServer(t *testing.T) {
	b := newTokenBed(t, false)
	extra := map[string][]string{
		"example.com/scope:read": {"a"}, "acme.io/team@x=1": {"b"}, "acme.io/100%": {"c"}, "acme.io/with space": {"d"},
	}
	u := &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}, Extra: extra}
	tok, _, _, err := proxytoken.Sign(b.key, testAudience, u, 5*time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code := b.do(t, nil, []string{"Bearer " + tok}, nil); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	got := map[string][]string{}
	for k, vs := range *b.up.last.Load() {
		lk := strings.ToLower(k)
		if !strings.HasPrefix(lk, "impersonate-extra-") {
			continue
		}
		key, err := url.PathUnescape(strings.TrimPrefix(lk, "impersonate-extra-"))
		if err != nil {
			t.Fatalf("%s does not unescape: %v", k, err)
		}
		got[key] = vs
	}
	for k, vs := range extra {
		if fmt.Sprint(got[k]) != fmt.Sprint(vs) {
			t.Errorf("extra %q reached the API server as %v, want %v (all: %v)", k, got[k], vs, got)
		}
	}
}

func TestExtraHeaderKey(t *testing.T) {
	for _, k := range []string{"authentication.kubernetes.io/credential-id", "a:b=c@d", "x%2Fy", "ünï", "tab\there", ""} {
		esc := impersonator.ExtraHeaderKey(k)
		if !httpguts.ValidHeaderFieldName("Impersonate-Extra-"+esc) && k != "" {
			t.Errorf("%q escapes to %q, not a valid header name", k, esc)
		}
		if back, err := url.PathUnescape(esc); err != nil || back != k {
			t.Errorf("%q escapes to %q, which unescapes to %q (%v)", k, esc, back, err)
		}
	}
}
