package proxyheaders

import (
	"net/http"
	"testing"
)

func TestIsIdentityHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "authorization": true, "Proxy-Authorization": true,
		"Forwarded": true, "X-Real-Ip": true, "Impersonate-User": true, "impersonate_group": true,
		"Impersonate-Extra-Scopes": true, "X-Remote-User": true, "x_remote_group": true,
		"X-Forwarded-For": true, "X-Forwarded-Proto": true,
		"Accept": false, "Content-Type": false, "User-Agent": false, "X-Request-Id": false, "Impersonator": false,
	} {
		if got := IsIdentityHeader(name); got != want {
			t.Errorf("IsIdentityHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestStripIdentityHeaders(t *testing.T) {
	h := http.Header{
		"Authorization": {"Bearer x"}, "impersonate-user": {"root"}, "X_Remote_User": {"root"},
		"Accept": {"application/json"}, "User-Agent": {"kubectl"},
	}
	StripIdentityHeaders(h)
	if len(h) != 2 || h.Get("Accept") == "" || h.Get("User-Agent") == "" {
		t.Errorf("after stripping: %v", h)
	}
}

func TestImpersonationRequested(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want bool
	}{
		{http.Header{}, false},
		{http.Header{"Accept": {"x"}, "Impersonator": {"x"}, "X-Remote-User": {"x"}}, false},
		{http.Header{"Impersonate-User": {"bob"}}, true},
		{http.Header{"impersonate_group": {"admins"}}, true},
		{http.Header{"IMPERSONATE-UID": {"0"}}, true},
		{http.Header{"Impersonate-Extra-Scopes": {"all"}}, true},
	} {
		if _, got := ImpersonationRequested(tc.h); got != tc.want {
			t.Errorf("ImpersonationRequested(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestHopByHopProblem(t *testing.T) {
	for _, tc := range []struct {
		h     http.Header
		token string
		bad   bool
	}{
		{http.Header{}, "", false},
		{http.Header{"Connection": {"Upgrade"}}, "", false},
		{http.Header{"Connection": {"keep-alive, Upgrade", ", close,"}}, "", false},
		{http.Header{"Connection": {"close", "Authorization"}}, "authorization", true},
		{http.Header{"connection": {"upgrade,\tImpersonate-User"}}, "impersonate-user", true},
		{http.Header{"Connection": {"x-foo"}}, "x-foo", true},
	} {
		token, bad := HopByHopProblem(tc.h)
		if token != tc.token || bad != tc.bad {
			t.Errorf("HopByHopProblem(%v) = %q, %v; want %q, %v", tc.h, token, bad, tc.token, tc.bad)
		}
	}
}

func TestWebSocketBearer(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want bool
	}{
		{http.Header{}, false},
		{http.Header{"Sec-Websocket-Protocol": {"v5.channel.k8s.io, v4.channel.k8s.io"}}, false},
		{http.Header{"Sec-Websocket-Protocol": {"v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.eA"}}, true},
		{http.Header{"sec-websocket-protocol": {"v5.channel.k8s.io", " BASE64URL.Bearer.authorization.k8s.io.eA"}}, true},
	} {
		if got := WebSocketBearer(tc.h); got != tc.want {
			t.Errorf("WebSocketBearer(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}
