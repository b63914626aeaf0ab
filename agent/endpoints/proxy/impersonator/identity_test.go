package impersonator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/agent/apis/proxyheaders"
)

type countingTransport struct{ calls int }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls++
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// TestIdentityCheckFailsClosed: the last step before the wire refuses a
// request without the proxy's identity decision, or whose identity headers
// differ from it in any way; only the exact decision is sent.
func TestIdentityCheckFailsClosed(t *testing.T) {
	next := &countingTransport{}
	check := &identityCheck{next: next, impersonate: true}
	decided := http.Header{"Impersonate-User": {"alice"}, "Impersonate-Group": {"devs"}}
	for name, c := range map[string]struct {
		decision http.Header
		headers  http.Header
		sent     bool
	}{
		"no decision":               {nil, http.Header{}, false},
		"no decision, no headers":   {nil, nil, false},
		"decided but headers gone":  {decided, http.Header{}, false},
		"a group missing":           {decided, http.Header{"Impersonate-User": {"alice"}}, false},
		"another user":              {decided, http.Header{"Impersonate-User": {"admin"}, "Impersonate-Group": {"devs"}}, false},
		"an extra group":            {decided, http.Header{"Impersonate-User": {"alice"}, "Impersonate-Group": {"devs", "system:masters"}}, false},
		"an Authorization added":    {decided, http.Header{"Impersonate-User": {"alice"}, "Impersonate-Group": {"devs"}, "Authorization": {"Bearer x"}}, false},
		"a non-canonical duplicate": {decided, http.Header{"Impersonate-User": {"alice"}, "Impersonate-Group": {"devs"}, "impersonate-user": {"admin"}}, false},
		"exactly the decision":      {decided, decided.Clone(), true},
		"nobody to impersonate":     {http.Header{}, http.Header{"Accept": {"*/*"}}, false},
		"an empty user":             {http.Header{"Impersonate-User": {""}}, http.Header{"Impersonate-User": {""}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			before := next.calls
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://kube-apiserver/api", nil)
			if c.decision != nil {
				req = withIdentity(req, c.decision)
			}
			req.Header = c.headers
			if req.Header == nil {
				req.Header = http.Header{}
			}
			resp, err := check.RoundTrip(req)
			if resp != nil {
				_ = resp.Body.Close()
			}
			if sent := next.calls != before; sent != c.sent {
				t.Fatalf("sent %v, want %v (error %v)", sent, c.sent, err)
			}
			if !c.sent && !errors.Is(err, errIdentityMismatch) {
				t.Fatalf("refusal error %v", err)
			}
		})
	}
}

// TestDirectTransportsSendNoIdentity: on the transports without the
// agent's credentials, an anonymous request goes with no identity header,
// and any identity header the decision does not hold is refused.
func TestDirectTransportsSendNoIdentity(t *testing.T) {
	next := &countingTransport{}
	check := &identityCheck{next: next}
	for name, c := range map[string]struct {
		headers http.Header
		sent    bool
	}{
		"anonymous, nothing":         {http.Header{"Accept": {"*/*"}}, true},
		"anonymous with an identity": {http.Header{"X-Remote-User": {"admin"}}, false},
	} {
		before := next.calls
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://kube-apiserver/api", nil)
		req = withIdentity(req, http.Header{})
		req.Header = c.headers
		resp, err := check.RoundTrip(req)
		if resp != nil {
			_ = resp.Body.Close()
		}
		if sent := next.calls != before; sent != c.sent {
			t.Errorf("%s: sent %v (%v)", name, sent, err)
		}
	}
}

type recordingTransport struct{ last http.Header }

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.last = req.Header.Clone()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// TestIdentitySurvivesHopByHopRemoval: past the Connection gate (as if it
// were gone, or let a token through), the reverse proxy's own hop-by-hop
// removal must not touch the identity headers, because they are set in
// Rewrite, after it. A request whose Connection names them is still sent,
// with exactly the decided identity; set any earlier, they would be
// deleted and the last check would refuse the request.
func TestIdentitySurvivesHopByHopRemoval(t *testing.T) {
	up := &recordingTransport{}
	p := &Proxy{Log: slog.New(slog.DiscardHandler), Upstream: &url.URL{Scheme: "https", Host: "kube-apiserver"}, Transport: up, UpgradeTransport: up}
	p.Init()
	decided := http.Header{}
	decided.Set("Impersonate-User", "alice")
	decided.Set("Impersonate-Group", "devs")
	decided.Set("Impersonate-Extra-"+OriginalUserExtra, `{"username":"alice"}`)
	extra := http.CanonicalHeaderKey("Impersonate-Extra-" + OriginalUserExtra)
	for _, conn := range []string{
		"Impersonate-User",
		"impersonate-user, IMPERSONATE-GROUP",
		extra,
		"keep-alive,Impersonate-User,Impersonate-Group," + strings.ToLower(extra),
	} {
		up.last = nil
		r := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
		r.Header.Set("Connection", conn)
		rec := httptest.NewRecorder()
		p.proxy.ServeHTTP(rec, withIdentity(r, decided.Clone()))
		if rec.Code != http.StatusOK || up.last == nil {
			t.Fatalf("Connection: %s: %d, sent %v", conn, rec.Code, up.last != nil)
		}
		got := http.Header{}
		for k, vs := range up.last {
			if proxyheaders.IsIdentityHeader(k) {
				got[k] = vs
			}
		}
		if !sameHeaders(got, decided) {
			t.Fatalf("Connection: %s: the API server saw %v, want %v", conn, got, decided)
		}
	}
}
