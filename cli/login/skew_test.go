package login_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/endpoints/exchange"
	"github.com/pinniped-kit/pinniped/cli/login/agentclient"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

// skewedCluster is the agent's real exchange handler on a cluster whose
// clock is skew ahead of this machine's (negative: behind): its CA, its
// JWTAuthenticator and its answers' Date header all read that clock. The
// issuer shares this machine's clock, so it is as far from the cluster's:
// the JWTAuthenticator allows that skew (spec.allowedClockSkew), as an
// administrator would for such an issuer.
func skewedCluster(t *testing.T, h *harness, skew time.Duration) (*config.Concierge, *x509.CertPool) {
	t.Helper()
	clusterNow := func() time.Time { return h.clk.now().Add(skew) }
	spec := authv1alpha1.JWTAuthenticatorSpec{Issuer: h.idp.URL, Audience: h.idp.ClientID, AllowedClockSkew: &metav1.Duration{Duration: skew.Abs()}}
	a, err := jwt.New(context.Background(), jwt.Config{Spec: spec, CABundle: h.idp.CABundle, Now: clusterNow})
	if err != nil {
		t.Fatal(err)
	}
	reg := tokenauth.NewRegistry()
	reg.Set(tokenauth.Key{Kind: "JWTAuthenticator", Name: "dex"}, a)
	ca, err := certauthority.New("cluster", 24*time.Hour, clusterNow)
	if err != nil {
		t.Fatal(err)
	}
	handler := &exchange.Handler{Now: time.Now, Authenticators: reg, Credentials: &clustercred.CA{CA: ca}, Log: slog.New(slog.DiscardHandler)}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", clusterNow().UTC().Format(http.TimeFormat))
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	return &config.Concierge{Endpoint: srv.URL, AuthenticatorType: "jwt", AuthenticatorName: "dex",
		CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}, roots
}

// TestClusterClockSkew: this machine's clock 2 minutes behind or ahead of
// the cluster's. The certificate kubectl is handed must be valid on the API
// server's clock from the moment it is issued until the plugin hands out
// its successor: then, when a long-running kubectl asks the plugin again
// (at the expiry it was told, or after a 401), it gets a new one, never the
// one the cluster now refuses.
func TestClusterClockSkew(t *testing.T) {
	for _, skew := range []time.Duration{2 * time.Minute, -2 * time.Minute} {
		t.Run("cluster "+skew.String(), func(t *testing.T) {
			h := newHarness(t)
			concierge, roots := skewedCluster(t, h, skew)
			e := h.engine(nil)
			e.Exchange = func(ctx context.Context, c *config.Concierge, token string) (*loginv1alpha1.ClusterCredential, error) {
				h.exchanges.Add(1)
				return agentclient.ExchangeAt(ctx, c, token, h.clk.now)
			}
			r := h.request(true)
			r.Concierge = concierge
			login := func() (cert *x509.Certificate, expires time.Time) {
				t.Helper()
				var out bytes.Buffer
				e.Stdout = &out
				if err := e.LoginOIDC(context.Background(), r, interactive); err != nil {
					t.Fatal(err)
				}
				st := decode(t, out.Bytes())["status"].(map[string]any)
				block, _ := pem.Decode([]byte(st["clientCertificateData"].(string)))
				cert, err := x509.ParseCertificate(block.Bytes)
				if err != nil {
					t.Fatal(err)
				}
				expires, err = time.Parse(time.RFC3339, st["expirationTimestamp"].(string))
				if err != nil {
					t.Fatal(err)
				}
				return cert, expires
			}
			// validAt says whether the API server (on the cluster's clock)
			// accepts cert when this machine's clock reads local.
			validAt := func(cert *x509.Certificate, local time.Time) bool {
				_, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: local.Add(skew),
					KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
				return err == nil
			}

			first, expires := login()
			if !validAt(first, h.clk.now()) {
				t.Fatal("the API server refuses a certificate just issued")
			}
			if left := expires.Sub(h.clk.now()); left < 4*time.Minute || left > 5*time.Minute+5*time.Second {
				t.Fatalf("kubectl was told the certificate has %v left; on the cluster's clock it has 5m", left)
			}
			// kubectl asks every 10 s, as a busy user's would; each answer
			// must be accepted by the API server at the time it is given,
			// and for kubectl's own expiry after it.
			for step := 10 * time.Second; step <= 12*time.Minute; step += 10 * time.Second {
				h.clk.add(10 * time.Second)
				cert, expires := login()
				if !validAt(cert, h.clk.now()) || !validAt(cert, expires.Add(-time.Second)) {
					t.Fatalf("after %v the plugin handed out a certificate valid on the cluster's clock until %v, told kubectl %v; the cluster's clock reads %v",
						step, cert.NotAfter, expires, h.clk.now().Add(skew))
				}
			}
			// A certificate lives 5 minutes; the credential cache renews 30 s
			// early. More than one exchange per 4 minutes means the skew
			// made the cache throw away certificates the cluster still
			// takes.
			if n := h.exchanges.Load(); n > 4 {
				t.Fatalf("%d exchanges in 12 minutes", n)
			}
		})
	}
}
