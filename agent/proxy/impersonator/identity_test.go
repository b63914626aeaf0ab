package impersonator

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
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
