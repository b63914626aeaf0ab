//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestFIPS: in `make e2e-fips` pinniped's binaries run in FIPS 140-3 mode
// with the module enforced, and say so (pinniped version, the agent's log
// when it starts serving); cryptography outside the module fails loudly: an
// issuer whose TLS certificate has a 1024-bit RSA key, which an ordinary
// build talks to, is refused with an error that names FIPS, before a byte
// of HTTP is sent. In an ordinary run the same steps are the control: no
// FIPS mode claimed, and the same issuer reached.
func TestFIPS(t *testing.T) {
	fips := FIPSOnly(t)
	pinniped := installAgent(t)
	wantMode := "off"
	if fips {
		wantMode = "FIPS 140-3 mode, Go module " + FIPSModule + ", enforced"
	}

	t.Run("the binaries say which crypto they run", func(t *testing.T) {
		line := Run(t, nil, pinniped, "version")
		if got := strings.Contains(line, "FIPS 140-3 mode"); got != fips || (fips && !strings.Contains(line, wantMode)) {
			t.Errorf("pinniped version: %q; want FIPS mode %q", strings.TrimSpace(line), wantMode)
		}
		var logs string
		Eventually(t, 2*time.Minute, "the agent's replicas log the crypto they serve with", func(_ context.Context) error {
			out, err := RunE(nil, "kubectl", "-n", "pinniped", "logs", "-l", "app.kubernetes.io/name=pinniped-agent", "--tail=-1", "--prefix")
			if err != nil {
				return err
			}
			logs = out
			if !strings.Contains(out, "serving the aggregated API") {
				return errors.New("no replica serves the aggregated API yet")
			}
			return nil
		})
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "serving the aggregated API") && !strings.Contains(l, wantMode) {
				t.Errorf("an agent replica started with other crypto than %q: %s", wantMode, l)
			}
		}
	})

	t.Run("crypto outside the module fails loudly", func(t *testing.T) {
		var requests atomic.Int32
		srv, caFile := weakTLSIssuer(t, func(w http.ResponseWriter, _ *http.Request) {
			requests.Add(1)
			http.NotFound(w, nil)
		})
		alice := testbed.DexUsers[0]
		env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
		out, err := RunE(env, pinniped, "login", "oidc", "--issuer="+srv.URL, "--ca-bundle="+caFile, "--flow=password", "--credential-cache=none")
		if err == nil {
			t.Fatalf("a login at an issuer that serves a 404 worked: %s", out)
		}
		named := strings.Contains(err.Error(), "FIPS")
		switch {
		case fips && (!named || requests.Load() != 0):
			t.Errorf("FIPS-only: the RSA-1024 issuer must be refused at the handshake with an error naming FIPS; %d HTTP requests arrived, error: %v", requests.Load(), err)
		case !fips && (named || requests.Load() == 0):
			t.Errorf("control (an ordinary build): the RSA-1024 issuer must be reached; %d HTTP requests arrived, error: %v", requests.Load(), err)
		}
		t.Logf("fips140=%s: %d HTTP requests reached the RSA-1024 issuer; the login said: %s", map[bool]string{true: "only", false: "off"}[fips], requests.Load(), lastLine(err.Error()))
	})
}

// weakTLSIssuer serves h over TLS on 127.0.0.1 with a self-signed 1024-bit
// RSA certificate (which Go outside FIPS mode still accepts) and returns it
// with a CA bundle file that trusts it.
func weakTLSIssuer(t *testing.T, h http.HandlerFunc) (*httptest.Server, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weak issuer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	// The refused handshakes are the point: not worth a line each.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "weak-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, caFile
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}
