package server_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clientspdy "k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority/catest"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/rawhttptest"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/localproxy/server"
	"github.com/pinniped-kit/pinniped/cli/localproxy/upstream"
)

// seenRequest is what the API server saw of one request.
type seenRequest struct {
	CN     string // the client certificate's common name, "" without one
	Header http.Header
	Proto  string
	URI    string
}

// apiServer is a TLS upstream that, like kube-apiserver, takes a client
// certificate from its CA when one is offered, and records who it saw.
type apiServer struct {
	*httptest.Server
	ca    *certauthority.CA
	calls atomic.Int64
	mu    sync.Mutex
	seen  []seenRequest
	// events feeds /watch until closed.
	events chan string

	upgradesMu sync.Mutex
	upgrades   []httpstream.Connection
}

func newAPIServer(t testing.TB) *apiServer {
	t.Helper()
	ca, serverTLS := catest.LoopbackServer(t)
	a := &apiServer{ca: ca, events: make(chan string)}
	a.Server = httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	a.EnableHTTP2 = true
	a.TLS = serverTLS
	a.StartTLS()
	t.Cleanup(func() {
		a.upgradesMu.Lock()
		for _, c := range a.upgrades {
			_ = c.Close()
		}
		a.upgradesMu.Unlock()
		a.Close()
	})
	return a
}

func peerCN(r *http.Request) string {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		return r.TLS.PeerCertificates[0].Subject.CommonName
	}
	return ""
}

func (a *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	a.calls.Add(1)
	s := seenRequest{CN: peerCN(r), Header: r.Header.Clone(), Proto: r.Proto, URI: r.RequestURI}
	a.mu.Lock()
	a.seen = append(a.seen, s)
	a.mu.Unlock()
	if strings.HasSuffix(r.URL.Path, "/redirect") {
		// What an API server, or anything it passes responses from (an
		// aggregated API, a service proxy), can answer, under any base path.
		w.Header().Set("Location", r.URL.Query().Get("to"))
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	switch r.URL.Path {
	case "/watch":
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "cn="+s.CN+" proto="+s.Proto+"\n")
		w.(http.Flusher).Flush()
		for ev := range a.events {
			_, _ = io.WriteString(w, ev+"\n")
			w.(http.Flusher).Flush()
		}
	case "/spdy":
		// An exec-like SPDY upgrade: every stream first says whose
		// connection it is on, then echoes.
		if _, err := httpstream.Handshake(r, w, []string{"test.v1"}); err != nil {
			return
		}
		conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(st httpstream.Stream, replySent <-chan struct{}) error {
			go func() {
				<-replySent
				_, _ = io.WriteString(st, "cn="+s.CN+"\n")
				_, _ = io.Copy(st, st)
				_ = st.Close()
			}()
			return nil
		})
		if conn != nil {
			a.upgradesMu.Lock()
			a.upgrades = append(a.upgrades, conn)
			a.upgradesMu.Unlock()
		}
	case "/list":
		n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = w.Write(listBody(n))
	default:
		w.Header().Set("Content-Type", "text/plain")
		_, _ = fmt.Fprintf(w, "cn=%s auth=%s proto=%s uri=%s", s.CN, r.Header.Get("Authorization"), r.Proto, r.RequestURI)
	}
}

var listBodies sync.Map

func listBody(n int) []byte {
	if b, ok := listBodies.Load(n); ok {
		return b.([]byte)
	}
	b := bytes.Repeat([]byte("x"), n)
	listBodies.Store(n, b)
	return b
}

func (a *apiServer) last(t testing.TB) seenRequest {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		t.Fatal("the API server saw no request")
	}
	return a.seen[len(a.seen)-1]
}

func (a *apiServer) base() *rest.Config {
	return &rest.Config{Host: a.URL, TLSClientConfig: rest.TLSClientConfig{CAData: a.ca.CertPEM()}}
}

func (a *apiServer) certGen(t testing.TB, user string, n int) *upstream.Generation {
	t.Helper()
	c, err := a.ca.IssueClientCert(user, "", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return a.gen(t, credcache.Credential{ClientCertificateData: string(c.CertPEM), ClientKeyData: string(c.KeyPEM), ExpirationTimestamp: c.NotAfter}, n)
}

func (a *apiServer) gen(t testing.TB, cred credcache.Credential, n int) *upstream.Generation {
	t.Helper()
	g, err := upstream.NewGeneration(a.base(), cred, n)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const (
	secret = "local-secret-0123456789abcdef" //nolint:gosec // a test secret
	slug   = "kind-abc123"
	ctx    = "kind-dev"
)

// localProxy is the handler served over TLS with HTTP/2, as `pinniped
// proxy` serves it, with its log kept to check it for secrets.
type localProxy struct {
	*httptest.Server
	holder *upstream.Holder
	logs   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newLocalProxy(t testing.TB, api *apiServer, state func() (bool, string)) *localProxy {
	t.Helper()
	u, err := url.Parse(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := &localProxy{holder: &upstream.Holder{RetireEvery: 20 * time.Millisecond}, logs: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := server.New([]byte(secret), []*server.Target{{Context: ctx, Slug: slug, Upstream: u, Holder: p.holder, State: state}}, log)
	p.Server = httptest.NewUnstartedServer(h)
	p.EnableHTTP2 = true
	p.StartTLS()
	t.Cleanup(func() {
		p.Close()
		if l := p.logs.String(); strings.Contains(l, secret) || strings.Contains(l, "gen-token") {
			t.Errorf("the proxy logged a secret: %s", l)
		}
	})
	return p
}

// reply is a response whose body was read and closed.
type reply struct {
	StatusCode int
	Proto      string
	Header     http.Header
}

// do sends one request through the proxy with the local secret.
func (p *localProxy) do(t testing.TB, method, path string) (reply, string) {
	t.Helper()
	req, err := http.NewRequest(method, p.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{StatusCode: resp.StatusCode, Proto: resp.Proto, Header: resp.Header}, string(b)
}

// spdyConnect upgrades to SPDY through the proxy, as kubectl exec does.
func (p *localProxy) spdyConnect(t testing.TB) httpstream.Connection {
	t.Helper()
	cfg := &rest.Config{
		Host: p.URL + "/ctx/" + slug, BearerToken: secret,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Certificate().Raw})},
	}
	rt, upgrader, err := clientspdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, p.URL+"/ctx/"+slug+"/spdy", nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, proto, err := clientspdy.NegotiateStreaming(upgrader, &http.Client{Transport: rt}, req, "test.v1")
	if err != nil {
		t.Fatal(err)
	}
	if proto != "test.v1" {
		t.Fatalf("negotiated %q", proto)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// echoStream opens a stream on an upgraded connection and returns whose
// connection the API server says it is on.
func echoStream(t testing.TB, conn httpstream.Connection) (httpstream.Stream, *bufio.Reader, string) {
	t.Helper()
	st, err := conn.CreateStream(http.Header{"Streamtype": {"data"}})
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(st)
	first, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return st, r, strings.TrimSpace(first)
}

func echo(t testing.TB, st httpstream.Stream, r *bufio.Reader, msg string) {
	t.Helper()
	if _, err := io.WriteString(st, msg+"\n"); err != nil {
		t.Fatalf("write %q on the upgraded stream: %v", msg, err)
	}
	got, err := r.ReadString('\n')
	if err != nil || got != msg+"\n" {
		t.Fatalf("echo of %q on the upgraded stream: %q, %v", msg, got, err)
	}
}

// rawRequest sends one request as raw bytes over TLS, HTTP/1.x, as any
// client can, and returns the status (0 when the server closed without an
// answer).
func rawRequest(t testing.TB, addr, req string) int {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // a test server's certificate
	if err != nil {
		t.Fatal(err)
	}
	return rawhttptest.Send(t, conn, req)
}
