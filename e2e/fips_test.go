//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt/jwttest"
	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestFIPS: in `make e2e-fips` pinniped's binaries run in FIPS 140-3 mode
// with the module enforced (fips140=only), and say so (pinniped version,
// every agent replica's log); FIPS mode refuses what it must, loudly: an
// issuer whose TLS certificate has a 1024-bit RSA key is refused at the
// handshake (crypto/tls's rule in any FIPS mode), and a token signed with a
// 1024-bit RSA key is refused by the agent with the reason (the module's
// enforcement, fips140=only alone). In an ordinary run the same steps are
// the control: no FIPS mode claimed, the issuer reached, the token taken.
func TestFIPS(t *testing.T) {
	fips := FIPSOnly(t)
	pinniped := installAgent(t)
	wantMode := "off"
	if fips {
		wantMode = "FIPS 140-3 mode, Go module " + FIPSModule + ", enforced"
	}

	t.Run("the binaries say which crypto they run", func(t *testing.T) {
		line := Run(t, nil, pinniped, "version")
		if got := strings.Contains(line, "FIPS"); got != fips || (fips && !strings.Contains(line, wantMode)) {
			t.Errorf("pinniped version: %q; want FIPS mode %q", strings.TrimSpace(line), wantMode)
		}
		// The replicas running now, each by its own serving line: a pod of
		// an earlier ReplicaSet still in the log must not stand in for one.
		var serving map[string]string
		Eventually(t, 2*time.Minute, "every agent replica logs the crypto it serves with", func(_ context.Context) error {
			pods, err := RunE(nil, "kubectl", "-n", "pinniped", "get", "pods", "-l", "app.kubernetes.io/name=pinniped-agent",
				"-o", `jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name}{" "}{.metadata.deletionTimestamp}{"\n"}{end}`)
			if err != nil {
				return err
			}
			out, err := RunE(nil, "kubectl", "-n", "pinniped", "logs", "-l", "app.kubernetes.io/name=pinniped-agent", "--tail=-1", "--prefix")
			if err != nil {
				return err
			}
			serving = map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(pods), "\n") {
				name, deleting, _ := strings.Cut(strings.TrimSpace(l), " ")
				if name == "" || deleting != "" {
					continue
				}
				for _, line := range strings.Split(out, "\n") {
					if strings.HasPrefix(line, "[pod/"+name+"/") && strings.Contains(line, "serving the aggregated API") {
						serving[name] = line
					}
				}
				if serving[name] == "" {
					return fmt.Errorf("the replica %s has not logged its serving line yet", name)
				}
			}
			if len(serving) == 0 {
				return errors.New("no agent replica runs")
			}
			return nil
		})
		// The text handler quotes a value with spaces, the JSON one always.
		forms := []string{`fips140="` + wantMode + `"`, `"fips140":"` + wantMode + `"`, "fips140=" + wantMode + " ", "fips140=" + wantMode + "\n"}
		for pod, l := range serving {
			if !slices.ContainsFunc(forms, func(f string) bool { return strings.Contains(l+"\n", f) }) {
				t.Errorf("the agent replica %s started with other crypto than %q: %s", pod, wantMode, l)
			}
		}
	})

	t.Run("an issuer's certificate FIPS mode refuses", func(t *testing.T) {
		var requests atomic.Int32
		srv, caFile := weakTLSIssuer(t, func(w http.ResponseWriter, _ *http.Request) {
			requests.Add(1)
			http.NotFound(w, nil)
		})
		alice := testbed.DexUsers[0]
		env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
		_, stderr, err := RunCmd(env, pinniped, "login", "oidc", "--issuer="+srv.URL, "--ca-bundle="+caFile, "--flow=password", "--credential-cache=none")
		if err == nil {
			t.Fatalf("a login at an issuer that serves a 404 worked: %s", stderr)
		}
		const refusal = "no FIPS compatible certificate chains found" // crypto/tls's words
		switch {
		case fips && (!strings.Contains(stderr, refusal) || requests.Load() != 0):
			t.Errorf("FIPS: the RSA-1024 issuer must be refused at the handshake (%q); %d HTTP requests arrived; stderr:\n%s", refusal, requests.Load(), stderr)
		case !fips && (strings.Contains(stderr, refusal) || requests.Load() == 0):
			t.Errorf("control (an ordinary build): the RSA-1024 issuer must be reached; %d HTTP requests arrived; stderr:\n%s", requests.Load(), stderr)
		}
		t.Logf("fips140=%s: %d HTTP requests reached the RSA-1024 issuer; the login said: %s", map[bool]string{true: "only", false: "off"}[fips], requests.Load(), lastLine(stderr))
	})

	t.Run("a signature the module refuses", func(t *testing.T) {
		iss := jwttest.NewOn(t, Bed.Config().NodeIP)
		_, sign := iss.AddRS256(t, 1024)
		applyYAML(t, fmt.Sprintf(`apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: JWTAuthenticator
metadata: {name: rsa-1024}
spec:
  issuer: %s
  audience: cluster-e2e
  tls: {certificateAuthorityData: %s}
`, iss.URL, base64.StdEncoding.EncodeToString(iss.CABundle)))
		t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "jwtauthenticator", "rsa-1024", "--ignore-not-found") })
		waitPhase(t, "jwtauthenticator", "rsa-1024", "Ready")
		token := sign(map[string]any{"iss": iss.URL, "aud": "cluster-e2e", "sub": "erin-id", "username": "erin",
			"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()})
		if !fips {
			cred := exchangeUntilIssued(t, token, "JWTAuthenticator", "rsa-1024")
			t.Logf("control (an ordinary build): the agent took the RSA-1024 token (a certificate of %d bytes)", len(cred.Cert))
			return
		}
		const reason = "RSA of 1024 bits (2048 at least), which this agent cannot verify with: it runs FIPS 140-only"
		Eventually(t, 90*time.Second, "the agent refuses the token and logs why", func(context.Context) error {
			if cred := exchange(t, token, "JWTAuthenticator", "rsa-1024"); cred.Cert != "" || cred.Message != "authentication failed" {
				return fmt.Errorf("the exchange answered %+v, want authentication failed", cred)
			}
			out, err := RunE(nil, "kubectl", "-n", "pinniped", "logs", "-l", "app.kubernetes.io/name=pinniped-agent", "--tail=-1")
			if err != nil {
				return err
			}
			if !strings.Contains(out, reason) {
				return fmt.Errorf("no replica logged %q", reason)
			}
			return nil
		})
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
