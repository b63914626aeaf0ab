package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/localproxy/server"
	"github.com/pinniped-kit/pinniped/cli/localproxy/upstream"
)

func status(t *testing.T, body string) *metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil || s.Kind != "Status" {
		t.Fatalf("body is not a Kubernetes Status: %q (%v)", body, err)
	}
	return &s
}

func TestForwardsWithTheGenerationsCertificate(t *testing.T) {
	api := newAPIServer(t)
	p := newLocalProxy(t, api, nil)
	p.holder.Swap(api.certGen(t, "alice", 1))
	resp, body := p.do(t, http.MethodGet, "/ctx/"+slug+"/api/v1/namespaces/a%2Fb/pods?watch=1&x=%20")
	if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/2.0" {
		t.Fatalf("status %d over %s: %s", resp.StatusCode, resp.Proto, body)
	}
	if want := "cn=alice auth= proto=HTTP/2.0 uri=/api/v1/namespaces/a%2Fb/pods?watch=1&x=%20"; body != want {
		t.Errorf("the API server saw %q, want %q", body, want)
	}
	// The context's root, with and without the slash.
	for _, path := range []string{"/ctx/" + slug, "/ctx/" + slug + "/"} {
		if _, body := p.do(t, http.MethodGet, path); !strings.HasSuffix(body, " uri=/") {
			t.Errorf("%s reached the API server as %q", path, body)
		}
	}
}

func TestForwardsWithTheGenerationsToken(t *testing.T) {
	api := newAPIServer(t)
	p := newLocalProxy(t, api, nil)
	p.holder.Swap(api.gen(t, credcache.Credential{Token: "gen-token", ExpirationTimestamp: time.Now().Add(time.Hour)}, 1))
	_, body := p.do(t, http.MethodGet, "/ctx/"+slug+"/api")
	if want := "cn= auth=Bearer gen-token proto=HTTP/2.0 uri=/api"; body != want {
		t.Errorf("the API server saw %q, want %q", body, want)
	}
}

// TestLocalSecret: without the proxy's secret, nothing reaches the API
// server, and the answer says why.
func TestLocalSecret(t *testing.T) {
	api := newAPIServer(t)
	p := newLocalProxy(t, api, nil)
	p.holder.Swap(api.certGen(t, "alice", 1))
	for _, c := range []struct {
		name string
		auth []string
		want string
	}{
		{"none", nil, "no secret"},
		{"empty", []string{""}, "no bearer secret"},
		{"basic", []string{"Basic " + secret}, "no bearer secret"},
		{"bare scheme", []string{"Bearer "}, "no bearer secret"},
		{"wrong", []string{"Bearer not-the-secret"}, "not your pinniped proxy"},
		{"a prefix of it", []string{"Bearer " + secret[:len(secret)-1]}, "not your pinniped proxy"},
		{"longer", []string{"Bearer " + secret + "x"}, "not your pinniped proxy"},
		{"with another word", []string{"Bearer " + secret + " x"}, "not your pinniped proxy"},
		{"comma-joined", []string{"Bearer " + secret + ", Bearer x"}, "not your pinniped proxy"},
		{"twice", []string{"Bearer " + secret, "Bearer " + secret}, "more than one"},
		{"another, then it", []string{"Bearer x", "Bearer " + secret}, "more than one"},
		{"it, then another", []string{"Bearer " + secret, "Bearer x"}, "more than one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := api.calls.Load()
			req, _ := http.NewRequest(http.MethodGet, p.URL+"/ctx/"+slug+"/api", nil)
			req.Header["Authorization"] = c.auth
			resp, err := p.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			if s := status(t, string(b)); !strings.Contains(s.Message, c.want) || s.Reason != metav1.StatusReasonUnauthorized {
				t.Errorf("Status %+v, want a message with %q", s, c.want)
			}
			if api.calls.Load() != before {
				t.Error("the request reached the API server")
			}
		})
	}
	// The scheme is case-insensitive, as HTTP says.
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/ctx/"+slug+"/api", nil)
	req.Header.Set("Authorization", "bearer "+secret)
	resp, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("lower-case scheme: status %d", resp.StatusCode)
	}
}

// TestAfterSecret: the checks given with AfterSecret run, in the order
// given, only for a request that carried the secret, before anything else
// of the request path, and one that answers stops the request there.
func TestAfterSecret(t *testing.T) {
	var ran []string
	check := func(name string, stop bool) server.Option {
		return server.AfterSecret(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ran = append(ran, name)
				if stop {
					w.WriteHeader(http.StatusForbidden)
					return
				}
				next.ServeHTTP(w, r)
			})
		})
	}
	serve := func(h http.Handler, auth string) int {
		req := httptest.NewRequest(http.MethodGet, "/ctx/none/api", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	h := server.New([]byte(secret), nil, nil, check("first", false), check("second", false))
	for _, auth := range []string{"", "Bearer wrong", "Basic " + secret} {
		if code := serve(h, auth); code != http.StatusUnauthorized || len(ran) != 0 {
			t.Fatalf("Authorization %q: status %d, checks run %v; want 401 and none", auth, code, ran)
		}
	}
	if code := serve(server.New(nil, nil, nil, check("first", false)), ""); code != http.StatusInternalServerError || len(ran) != 0 {
		t.Fatalf("no secret configured: status %d, checks run %v; want 500 and none", code, ran)
	}
	if code := serve(h, "Bearer "+secret); code != http.StatusNotFound || !slices.Equal(ran, []string{"first", "second"}) {
		t.Fatalf("with the secret: status %d, checks run %v; want 404 after first, second", code, ran)
	}
	ran = nil
	h = server.New([]byte(secret), nil, nil, check("refuses", true), check("after", false))
	if code := serve(h, "Bearer "+secret); code != http.StatusForbidden || !slices.Equal(ran, []string{"refuses"}) {
		t.Fatalf("a check that answers: status %d, checks run %v; want 403 and only it", code, ran)
	}
}

func TestUnknownContext(t *testing.T) {
	api := newAPIServer(t)
	p := newLocalProxy(t, api, nil)
	p.holder.Swap(api.certGen(t, "alice", 1))
	for _, path := range []string{"/api", "/ctx/other/api", "/ctx/" + slug + "x/api", "/ctx/" + slug + "%2Fapi", "/ctx/"} {
		resp, body := p.do(t, http.MethodGet, path)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
		if s := status(t, body); !strings.Contains(s.Message, fmt.Sprintf("%q at /ctx/%s", ctx, slug)) {
			t.Errorf("%s: the 404 does not list the served context: %q", path, s.Message)
		}
	}
	if api.calls.Load() != 0 {
		t.Error("a request for an unknown context reached the API server")
	}
}

// TestNoCredentialIs503AtOnce: a context without a usable credential is an
// immediate error saying what to do, never a hang. Retry-After (which
// client-go obeys up to ten times) only while a credential is on its way
// without a person: a context that waits for a login answers at once.
func TestNoCredentialIs503AtOnce(t *testing.T) {
	api := newAPIServer(t)
	const why = "needs you to log in: see the terminal running `pinniped proxy`"
	var soon atomic.Bool
	p := newLocalProxy(t, api, func() (bool, string) { return soon.Load(), why })
	check := func(what, retryAfter string) {
		t.Helper()
		start := time.Now()
		resp, body := p.do(t, http.MethodGet, "/ctx/"+slug+"/api")
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: the answer took %s", what, took)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != retryAfter {
			t.Fatalf("%s: status %d, Retry-After %q, want 503 and %q", what, resp.StatusCode, resp.Header.Get("Retry-After"), retryAfter)
		}
		if s := status(t, body); !strings.Contains(s.Message, ctx) || !strings.Contains(s.Message, why) {
			t.Errorf("%s: Status message %q names neither the context nor why", what, s.Message)
		}
	}
	check("before any credential, waiting for a person", "")
	soon.Store(true)
	check("before any credential, one on its way", "5")
	p.holder.Swap(api.gen(t, credcache.Credential{Token: "gen-token", ExpirationTimestamp: time.Now().Add(-time.Second)}, 1))
	check("with an expired credential, its successor on its way", "5")
	soon.Store(false)
	check("with an expired credential, waiting for a person", "")
	if api.calls.Load() != 0 {
		t.Error("a request without a usable credential reached the API server")
	}
	p.holder.Swap(api.gen(t, credcache.Credential{Token: "gen-token", ExpirationTimestamp: time.Now().Add(time.Hour)}, 2))
	if resp, body := p.do(t, http.MethodGet, "/ctx/"+slug+"/api"); resp.StatusCode != http.StatusOK {
		t.Errorf("with a credential: status %d: %s", resp.StatusCode, body)
	}
}

// TestSwapKeepsStreams is why the proxy exists: a renewed credential takes
// effect for new requests while a watch over HTTP/2 and an upgraded SPDY
// connection opened before it keep flowing on the old credential's
// connections, which close once those streams end.
func TestSwapKeepsStreams(t *testing.T) {
	api := newAPIServer(t)
	p := newLocalProxy(t, api, nil)
	var retired atomic.Int64
	p.holder.Retired = func(g *upstream.Generation) { retired.Store(int64(g.N)) }
	gen1 := api.certGen(t, "gen1", 1)
	p.holder.Swap(gen1)

	// A watch, HTTP/2 end to end.
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/ctx/"+slug+"/watch", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	watch, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Body.Close()
	events := bufio.NewReader(watch.Body)
	readEvent := func() string {
		t.Helper()
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("the watch ended: %v", err)
		}
		return strings.TrimSpace(line)
	}
	if got := readEvent(); got != "cn=gen1 proto=HTTP/2.0" || watch.Proto != "HTTP/2.0" {
		t.Fatalf("watch opened as %q, client side %s", got, watch.Proto)
	}
	// An exec-like SPDY upgrade.
	conn := p.spdyConnect(t)
	st, sr, who := echoStream(t, conn)
	if who != "cn=gen1" {
		t.Fatalf("the upgrade reached the API server as %q", who)
	}
	echo(t, st, sr, "before the swap")
	if got := gen1.OpenConns(); got != 2 {
		t.Fatalf("gen1 has %d open connections, want 2 (the watch's HTTP/2 and the upgrade's)", got)
	}

	gen2 := api.certGen(t, "gen2", 2)
	p.holder.Swap(gen2)

	// New requests and new upgrades carry the new certificate.
	if _, body := p.do(t, http.MethodGet, "/ctx/"+slug+"/api"); !strings.HasPrefix(body, "cn=gen2 ") {
		t.Errorf("a request after the swap reached the API server as %q", body)
	}
	conn2 := p.spdyConnect(t)
	if _, _, who := echoStream(t, conn2); who != "cn=gen2" {
		t.Errorf("an upgrade after the swap reached the API server as %q", who)
	}
	_ = conn2.Close()

	// The old streams outlive many retire passes (every 20ms here).
	for i := range 5 {
		time.Sleep(50 * time.Millisecond)
		api.events <- fmt.Sprint("event ", i)
		if got := readEvent(); got != fmt.Sprint("event ", i) {
			t.Fatalf("watch after the swap: %q", got)
		}
		echo(t, st, sr, fmt.Sprint("after the swap ", i))
	}
	// A new stream on the old upgraded connection is still on gen1's.
	st1b, sr1b, who := echoStream(t, conn)
	if who != "cn=gen1" {
		t.Errorf("a new stream on the old upgrade is on %q", who)
	}
	echo(t, st1b, sr1b, "second stream")
	if retired.Load() == 1 || gen1.OpenConns() != 2 {
		t.Fatalf("gen1 retired (%v) or lost connections (%d open) while its streams ran", retired.Load() == 1, gen1.OpenConns())
	}

	// The streams end; gen1's connections close and it is dropped.
	close(api.events)
	if _, err := events.ReadString('\n'); err != io.EOF {
		t.Fatalf("the watch did not end cleanly: %v", err)
	}
	_ = conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for gen1.OpenConns() != 0 || retired.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("gen1 still has %d open connections after its streams ended", gen1.OpenConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if gen2.OpenConns() == 0 {
		t.Error("the current generation lost its connections")
	}
	if _, body := p.do(t, http.MethodGet, "/ctx/"+slug+"/api"); !strings.HasPrefix(body, "cn=gen2 ") {
		t.Errorf("after gen1 retired, a request reached the API server as %q", body)
	}
}
