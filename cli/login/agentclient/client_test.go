package agentclient_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt/jwttest"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/endpoints/exchange"
	"github.com/pinniped-kit/pinniped/cli/login/agentclient"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

// TestAgainstTheAgentHandler runs the client against the agent's real
// exchange handler: the two halves of the wire contract meet here.
func TestAgainstTheAgentHandler(t *testing.T) {
	iss := jwttest.New(t)
	a, err := jwt.New(context.Background(), jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL, Audience: "cluster-a"}, CABundle: iss.CABundle})
	if err != nil {
		t.Fatal(err)
	}
	reg := tokenauth.NewRegistry()
	reg.Set(tokenauth.Key{Kind: "JWTAuthenticator", Name: "dex"}, a)
	ca, _ := certauthority.New("c", time.Hour, nil)
	srv := httptest.NewTLSServer(&exchange.Handler{Now: time.Now, Authenticators: reg, Credentials: &clustercred.CA{CA: ca}, Log: slog.New(slog.DiscardHandler)})
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	cfg := &config.Concierge{Endpoint: srv.URL, CABundle: caPEM, AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	token := iss.Sign(t, map[string]any{"iss": iss.URL, "aud": "cluster-a", "exp": time.Now().Add(time.Hour).Unix(), "username": "alice"})
	cred, err := agentclient.Exchange(context.Background(), cfg, token)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cred.ClientCertificateData, "BEGIN CERTIFICATE") || cred.ExpirationTimestamp.IsZero() {
		t.Fatalf("credential %+v", cred)
	}
	// Clocks that agree leave the expiry as the agent gave it (it is
	// restated on this machine's clock only beyond the Date header's noise).
	block, _ := pem.Decode([]byte(cred.ClientCertificateData))
	if block == nil {
		t.Fatal("the credential's certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.NotAfter.Equal(cred.ExpirationTimestamp.Time) {
		t.Fatalf("expiry %v, certificate's NotAfter %v", cred.ExpirationTimestamp, cert.NotAfter)
	}

	_, err = agentclient.Exchange(context.Background(), cfg, "garbage")
	if !errors.Is(err, agentclient.ErrRefused) {
		t.Fatalf("want ErrRefused, got %v", err)
	}

	cfg.APIGroupSuffix = "other.example"
	_, err = agentclient.Exchange(context.Background(), cfg, token)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("wrong suffix: %v", err)
	}
}

// TestProbe: the agent's real handler refuses the probe's token, which
// shows its API is served; a server without the API answers 404.
func TestProbe(t *testing.T) {
	reg := tokenauth.NewRegistry()
	ca, _ := certauthority.New("c", time.Hour, nil)
	agent := httptest.NewTLSServer(&exchange.Handler{Now: time.Now, Authenticators: reg, Credentials: &clustercred.CA{CA: ca}, Log: slog.New(slog.DiscardHandler)})
	defer agent.Close()
	cfg := &config.Concierge{Endpoint: agent.URL, AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	a, err := agentclient.Probe(context.Background(), agent.Client(), cfg)
	if err != nil || !a.Refused || a.Status != 201 || a.Message == "" || a.Date == "" {
		t.Fatalf("%+v %v", a, err)
	}
	none := httptest.NewTLSServer(http.NotFoundHandler())
	defer none.Close()
	cfg.Endpoint = none.URL
	if a, err := agentclient.Probe(context.Background(), none.Client(), cfg); err != nil || a.Refused || a.Status != 404 {
		t.Fatalf("%+v %v", a, err)
	}
	cfg.AuthenticatorType = "ldap"
	if _, err := agentclient.Probe(context.Background(), none.Client(), cfg); err == nil {
		t.Fatal("an unknown authenticator type was probed")
	}
}
