package conciergeclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

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

func fastRetries(t *testing.T) {
	saved := retryBackoff
	retryBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 6}
	t.Cleanup(func() { retryBackoff = saved })
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

// TestGivesUp: an agent that stays unavailable is asked six times, then
// the error says what it answered and what to check.
func TestGivesUp(t *testing.T) {
	fastRetries(t)
	c, n := server(t, http.StatusServiceUnavailable)
	_, err := Exchange(context.Background(), c, "token")
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || !strings.Contains(err.Error(), "installed and ready") || n.Load() != 6 {
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
}
