package agentclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl/redirect"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

// created is a TokenCredentialRequest answer holding a credential.
const created = `{"apiVersion":"login.concierge.pinniped.dev/v1alpha1","kind":"TokenCredentialRequest",` +
	`"status":{"credential":{"token":"cluster-token","expirationTimestamp":"2099-01-01T00:00:00Z"}}}`

// server answers with the statuses in turn (then the last one), and
// counts the requests; 201 answers hold a credential.
func server(t *testing.T, statuses ...int) (*config.Concierge, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := int(n.Add(1)) - 1
		status := statuses[min(i, len(statuses)-1)]
		w.WriteHeader(status)
		if status == http.StatusCreated {
			_, _ = w.Write([]byte(created))
		}
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &config.Concierge{Endpoint: srv.URL, CABundle: ca, AuthenticatorType: "jwt", AuthenticatorName: "dex"}, &n
}

// fastRetries keeps the real schedule but records its waits instead of
// waiting them.
func fastRetries(t *testing.T) *[]time.Duration {
	var waits []time.Duration
	saved := sleep
	sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	t.Cleanup(func() { sleep = saved })
	return &waits
}

// TestRetriesWhatMayPass: a 503 (a replica that just died, as the
// aggregator answers), 502, 504 and 429 are tried again, and the exchange
// succeeds once the cluster answers.
func TestRetriesWhatMayPass(t *testing.T) {
	fastRetries(t)
	c, n := server(t, http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusTooManyRequests, http.StatusCreated)
	cred, err := Exchange(context.Background(), c, "token")
	if err != nil || cred.Token != "cluster-token" || n.Load() != 5 {
		t.Fatalf("%v %+v after %d requests", err, cred, n.Load())
	}
}

// TestGivesUp: an agent that stays unavailable is asked again on the real
// schedule (waits doubling from about 200 ms, at most 2 s each, 8 s in
// all: seven attempts), then the error says what it answered and what to
// check.
func TestGivesUp(t *testing.T) {
	waits := fastRetries(t)
	c, n := server(t, http.StatusServiceUnavailable)
	_, err := Exchange(context.Background(), c, "token")
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || !strings.Contains(err.Error(), "installed and ready") || n.Load() != 7 {
		t.Fatalf("%v after %d requests", err, n.Load())
	}
	var total time.Duration
	for i, w := range *waits {
		total += w
		if w > maxRetryWait || (i > 0 && w < (*waits)[i-1]*3/2 && w != maxRetryWait) {
			t.Errorf("wait %d is %s after %s", i, w, (*waits)[max(i-1, 0)])
		}
	}
	if len(*waits) != 6 || total > retryFor || total < 6*time.Second {
		t.Fatalf("waits %v (%s in all)", *waits, total)
	}
}

// TestRetriesAConnectionLost: a connection closed without an answer (the
// replica died mid-request) is tried again.
func TestRetriesAConnectionLost(t *testing.T) {
	fastRetries(t)
	var n atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) <= 2 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(created))
	}))
	defer srv.Close()
	c := &config.Concierge{Endpoint: srv.URL, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	if cred, err := Exchange(context.Background(), c, "token"); err != nil || cred.Token != "cluster-token" || n.Load() != 3 {
		t.Fatalf("%v after %d requests", err, n.Load())
	}
}

// TestCanceledWhileWaiting: the person giving up during a wait ends the
// exchange at once, saying why and what the cluster last answered.
func TestCanceledWhileWaiting(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	saved := sleep
	sleep = func(context.Context, time.Duration) error {
		cancel(errors.New("interrupted"))
		return context.Cause(ctx)
	}
	t.Cleanup(func() { sleep = saved })
	c, n := server(t, http.StatusServiceUnavailable)
	_, err := Exchange(ctx, c, "token")
	if err == nil || !strings.Contains(err.Error(), "interrupted") || !strings.Contains(err.Error(), "HTTP 503") || n.Load() != 1 {
		t.Fatalf("%v after %d requests", err, n.Load())
	}
}

// TestNoRetryForAnswersMeant: what the agent or the API server meant (a
// 4xx), and a server the client does not trust, are never tried again.
func TestNoRetryForAnswersMeant(t *testing.T) {
	fastRetries(t)
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusInternalServerError} {
		c, n := server(t, status)
		if _, err := Exchange(context.Background(), c, "token"); err == nil || n.Load() != 1 {
			t.Errorf("HTTP %d: %v after %d requests", status, err, n.Load())
		}
	}
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	// A CA of its own, which did not sign the server's certificate.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c := &config.Concierge{Endpoint: srv.URL, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	if _, err := Exchange(context.Background(), c, "token"); err == nil || conns.Load() != 1 {
		t.Errorf("untrusted server: %v after %d connections", err, conns.Load())
	}
	// A server that answers in plain HTTP, and one whose TLS handshake
	// ends in its own alert (it wants a client certificate).
	var plainConns atomic.Int64
	plain := httptest.NewUnstartedServer(http.NotFoundHandler())
	plain.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			plainConns.Add(1)
		}
	}
	plain.Start()
	defer plain.Close()
	c2 := &config.Concierge{Endpoint: strings.Replace(plain.URL, "http://", "https://", 1), CABundle: c.CABundle, AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	if _, err := Exchange(context.Background(), c2, "token"); err == nil || plainConns.Load() != 1 {
		t.Errorf("plain HTTP: %v after %d connections", err, plainConns.Load())
	}
	var alertConns atomic.Int64
	strict := httptest.NewUnstartedServer(http.NotFoundHandler())
	strict.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			alertConns.Add(1)
		}
	}
	strict.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS12}
	strict.StartTLS()
	defer strict.Close()
	c3 := &config.Concierge{Endpoint: strict.URL, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: strict.Certificate().Raw}),
		AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	if _, err := Exchange(context.Background(), c3, "token"); err == nil || alertConns.Load() != 1 {
		t.Errorf("a TLS alert: %v after %d connections", err, alertConns.Load())
	}

	// The right CA, but a name the certificate does not hold.
	conns.Store(0)
	c.CABundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c.Endpoint = strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	if _, err := Exchange(context.Background(), c, "token"); err == nil || !strings.Contains(err.Error(), "certificate") || conns.Load() != 1 {
		t.Errorf("wrong name: %v after %d connections", err, conns.Load())
	}
}

// TestBusyAgent: an agent that stays at its bound of exchanges, or an API
// server in front of it shedding load (429 with Retry-After and a
// TooManyRequests Status; this message is kube-apiserver's), is asked
// again on the schedule, then the error says the agent is busy and to try
// again.
func TestBusyAgent(t *testing.T) {
	fastRetries(t)
	var n atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
			`"message":"Too many requests, please try again later.",` +
			`"reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}`))
	}))
	defer srv.Close()
	c := &config.Concierge{Endpoint: srv.URL, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	_, err := Exchange(context.Background(), c, "token")
	if err == nil || !strings.Contains(err.Error(), "the agent is busy") || !strings.Contains(err.Error(), "try again in a moment") || n.Load() != 7 {
		t.Fatalf("%v after %d requests", err, n.Load())
	}
}

// TestNoRetryForARefusedRedirect: an endpoint that redirects to plain http
// or to another origin will do so again; the exchange is refused at once,
// and the error names the redirect once, without its query (which may
// hold a code or a token).
func TestNoRetryForARefusedRedirect(t *testing.T) {
	fastRetries(t)
	var plainHits atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { plainHits.Add(1) }))
	defer plain.Close()
	other := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { plainHits.Add(1) }))
	defer other.Close()
	for name, to := range map[string]string{"plain http": plain.URL, "another origin": other.URL} {
		var n atomic.Int64
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			http.Redirect(w, r, to+"/token?code=secret-code", http.StatusTemporaryRedirect)
		}))
		c := &config.Concierge{Endpoint: srv.URL, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
			AuthenticatorType: "jwt", AuthenticatorName: "dex"}
		_, err := Exchange(context.Background(), c, "token")
		srv.Close()
		if !errors.Is(err, httpsurl.ErrNotHTTPS) && !errors.Is(err, redirect.ErrCrossOrigin) {
			t.Errorf("%s: want the redirect refused, got %v", name, err)
			continue
		}
		if n.Load() != 1 {
			t.Errorf("%s: %d requests; a refused redirect must not be retried", name, n.Load())
		}
		if msg := err.Error(); strings.Contains(msg, "secret-code") || strings.Count(msg, to) != 1 {
			t.Errorf("%s: the error must name the target once, without its query: %v", name, msg)
		}
	}
	if plainHits.Load() != 0 {
		t.Errorf("the redirect targets received %d requests", plainHits.Load())
	}
}
