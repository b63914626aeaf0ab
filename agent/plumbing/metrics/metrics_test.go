package metrics_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/agent/plumbing/metrics"
	"github.com/pinniped-kit/pinniped/agent/plumbing/observe"
)

func TestProxyAuditLevels(t *testing.T) {
	requests := []observe.ProxyRequest{
		{Verb: http.MethodGet, Path: "/api/v1/pods", Code: 200, Method: observe.MethodCertificate, Username: "alice"},
		{Verb: http.MethodPost, Path: "/api/v1/namespaces/x/configmaps", Code: 201, Method: observe.MethodCertificate, Username: "alice"},
		{Verb: http.MethodGet, Path: "/api/v1/namespaces/x/pods/p/exec", Code: 101, Upgrade: "websocket", Method: observe.MethodCertificate, Username: "alice"},
		{Verb: http.MethodGet, Path: "/api/v1/secrets", Code: 403, Method: observe.MethodCertificate, Username: "alice"},
	}
	for _, c := range []struct {
		level metrics.ProxyAuditLevel
		want  []string
	}{
		{metrics.ProxyAuditAll, []string{"/api/v1/pods", "configmaps", "exec", "secrets"}},
		{metrics.ProxyAuditChanges, []string{"configmaps", "exec", "secrets"}},
		{metrics.ProxyAuditNone, nil},
	} {
		var buf bytes.Buffer
		m := metrics.New(slog.New(slog.NewJSONHandler(&buf, nil)), false)
		m.ProxyAudit = c.level
		for _, o := range requests {
			m.ObserveProxy(o)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if buf.Len() == 0 {
			lines = nil
		}
		if len(lines) != len(c.want) {
			t.Fatalf("%s: %d lines, want %d:\n%s", c.level, len(lines), len(c.want), buf.String())
		}
		for i, l := range lines {
			if !strings.Contains(l, c.want[i]) || strings.Contains(l, "alice") || !strings.Contains(l, `"auditEvent":true`) {
				t.Errorf("%s: line %d = %s", c.level, i, l)
			}
		}
	}
	if _, err := metrics.ParseProxyAuditLevel("some"); err == nil {
		t.Fatal("a bad level was accepted")
	}
}

// TestExchangeAuditNamesTheCredentialID: an exchange that issued a proxy
// token is logged with the token's credential ID, which the API server's
// audit log shows on every request made with it; a certificate has none,
// and then no empty field is logged. The username stays out unless opted in.
func TestExchangeAuditNamesTheCredentialID(t *testing.T) {
	var buf bytes.Buffer
	m := metrics.New(slog.New(slog.NewJSONHandler(&buf, nil)), false)
	m.Observe(observe.Exchange{Success: true, Authenticator: "WebhookAuthenticator/hook", TokenHash: "ab12", Username: "alice", CredentialID: "JTI=q7Rz"})
	m.Observe(observe.Exchange{Success: true, Authenticator: "WebhookAuthenticator/hook", TokenHash: "cd34", Username: "alice"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], `"credentialID":"JTI=q7Rz"`) || strings.Contains(lines[1], "credentialID") {
		t.Errorf("credential IDs logged wrong:\n%s", buf.String())
	}
	if strings.Contains(buf.String(), "alice") {
		t.Errorf("the username was logged without opting in:\n%s", buf.String())
	}
}
