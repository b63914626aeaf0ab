package metrics_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/agent/metrics"
	"github.com/pinniped-kit/pinniped/agent/proxy/impersonator"
)

func TestProxyAuditLevels(t *testing.T) {
	requests := []impersonator.Observation{
		{Verb: http.MethodGet, Path: "/api/v1/pods", Code: 200, Method: impersonator.MethodCertificate, Username: "alice"},
		{Verb: http.MethodPost, Path: "/api/v1/namespaces/x/configmaps", Code: 201, Method: impersonator.MethodCertificate, Username: "alice"},
		{Verb: http.MethodGet, Path: "/api/v1/namespaces/x/pods/p/exec", Code: 101, Upgrade: "websocket", Method: impersonator.MethodCertificate, Username: "alice"},
		{Verb: http.MethodGet, Path: "/api/v1/secrets", Code: 403, Method: impersonator.MethodCertificate, Username: "alice"},
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
