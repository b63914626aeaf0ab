package listener_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/listener"
)

func newCA(t *testing.T) *certauthority.CA {
	t.Helper()
	ca, err := certauthority.New(t.Name(), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func client(ca *certauthority.CA) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}, ForceAttemptHTTP2: true, DisableKeepAlives: true,
	}}
}

// ipPair is a serving certificate for localhost.
func ipPair(t *testing.T, ca *certauthority.CA) *tls.Certificate {
	t.Helper()
	leaf, err := ca.IssueServingCert("proxy", []string{"localhost"}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestCertificateSwapAndHTTP2(t *testing.T) {
	release := make(chan struct{})
	s := &listener.Server{Log: slog.New(slog.DiscardHandler), Addr: "127.0.0.1:0", Drain: 2 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, r.Proto)
	})}
	caA, caB := newCA(t), newCA(t)
	s.SetCertificate(ipPair(t, caA))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	url := "https://" + strings.Replace(s.ListenAddr(), "127.0.0.1", "localhost", 1)
	get := func(c *http.Client, path string) (string, error) {
		resp, err := c.Get(url + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for _, c := range []*http.Client{client(caA)} {
		c.Transport.(*http.Transport).TLSClientConfig.ServerName = "localhost"
		if proto, err := get(c, "/"); err != nil || proto != "HTTP/2.0" {
			t.Fatalf("first certificate: %q %v", proto, err)
		}
	}
	s.SetCertificate(ipPair(t, caB))
	cb := client(caB)
	cb.Transport.(*http.Transport).TLSClientConfig.ServerName = "localhost"
	if _, err := get(cb, "/"); err != nil {
		t.Fatalf("after the swap, new connections see the new certificate: %v", err)
	}
	ca := client(caA)
	ca.Transport.(*http.Transport).TLSClientConfig.ServerName = "localhost"
	if _, err := get(ca, "/"); err == nil {
		t.Fatal("the old certificate is still served")
	}

	// Stop waits for an in-flight request that finishes within the drain.
	done := make(chan error, 1)
	go func() { _, err := get(cb, "/slow"); done <- err }()
	time.Sleep(200 * time.Millisecond)
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	time.Sleep(200 * time.Millisecond)
	if _, err := get(cb, "/"); err == nil {
		t.Fatal("a stopping server must not accept new requests")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("in-flight request was cut instead of drained: %v", err)
	}
	<-stopped
	if s.Running() {
		t.Fatal("still running")
	}
}

func TestStopCutsStreamsAfterTheDrain(t *testing.T) {
	s := &listener.Server{Log: slog.New(slog.DiscardHandler), Addr: "127.0.0.1:0", Drain: 300 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a watch that never ends by itself
	})}
	ca := newCA(t)
	s.SetCertificate(ipPair(t, ca))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	c := client(ca)
	c.Transport.(*http.Transport).TLSClientConfig.ServerName = "localhost"
	resp, err := c.Get("https://" + strings.Replace(s.ListenAddr(), "127.0.0.1", "localhost", 1) + "/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	s.Stop()
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Fatalf("stop took %v; want the drain period, then a cut", d)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Log("stream ended cleanly after the cut")
	}
}

func TestNoCertificateNoHandshake(t *testing.T) {
	s := &listener.Server{Log: slog.New(slog.DiscardHandler), Addr: "127.0.0.1:0", Handler: http.NotFoundHandler()}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	_, err := tls.Dial("tcp", s.ListenAddr(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the point is the server's refusal
	if err == nil {
		t.Fatal("handshake without a serving certificate succeeded")
	}
}
