package loginsetup

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/cli/login/agentclient"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

func TestLoginHint(t *testing.T) {
	for _, c := range []struct{ name, kubeconfig, want string }{
		{"", "", "pinniped login --context <the context your tool uses>"},
		{"dev", "", "pinniped login --context dev"},
		{"dev", "/home/a/fleet.kubeconfig", "pinniped login --context dev --kubeconfig /home/a/fleet.kubeconfig"},
		{"dev", "/a:/b", "pinniped login --context dev"},
		{"my cluster", "", "pinniped login --context 'my cluster'"},
		{"prod;x", "", "pinniped login --context 'prod;x'"},
		{"evil\nrm -rf /", "", `pinniped login --context 'evil\x0arm -rf /'`},
	} {
		env := map[string]string{"PINNIPED_CONTEXT": c.name, "KUBECONFIG": c.kubeconfig}
		if got := LoginHint(func(k string) string { return env[k] }); got != c.want {
			t.Errorf("%q %q: %q, want %q", c.name, c.kubeconfig, got, c.want)
		}
	}
}

// TestExchangeRefusalIsTheRunners: the agent's refusal reaches the runner
// as login.ErrRefused (its contract), still the client's ErrRefused and
// with the agent's words; an agent that could not be asked is neither.
func TestExchangeRefusalIsTheRunners(t *testing.T) {
	for _, c := range []struct {
		status  int
		body    string
		refused bool
	}{
		{http.StatusCreated, `{"kind":"TokenCredentialRequest","apiVersion":"login.concierge.pinniped.dev/v1alpha1","status":{"message":"authentication failed"}}`, true},
		{http.StatusForbidden, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden"}`, false},
	} {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(c.body))
		}))
		conc := &config.Concierge{Endpoint: srv.URL, AuthenticatorType: "jwt", AuthenticatorName: "dex",
			CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
		_, err := exchange(context.Background(), conc, "a-token")
		srv.Close()
		if err == nil {
			t.Fatalf("HTTP %d: no error", c.status)
		}
		if errors.Is(err, login.ErrRefused) != c.refused || errors.Is(err, agentclient.ErrRefused) != c.refused {
			t.Errorf("HTTP %d: %v; refused %v as the runner sees it, %v as the client does, want %v", c.status, err,
				errors.Is(err, login.ErrRefused), errors.Is(err, agentclient.ErrRefused), c.refused)
		}
		if c.refused && !strings.Contains(err.Error(), "authentication failed") {
			t.Errorf("the refusal lost the agent's words: %v", err)
		}
	}
}
