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
	check := &identityCheck{next: next}
	decided := http.Header{"Impersonate-User": {"alice"}, "Impersonate-Group": {"devs"}}
	for name, c := range map[string]struct {
		decision http.Header
		headers  http.Header
		sent     bool
	}{
		"no decision":                {nil, http.Header{}, false},
		"no decision, no headers":    {nil, nil, false},
		"decided but headers gone":   {decided, http.Header{}, false},
		"a group missing":            {decided, http.Header{"Impersonate-User": {"alice"}}, false},
		"another user":               {decided, http.Header{"Impersonate-User": {"admin"}, "Impersonate-Group": {"devs"}}, false},
		"an extra group":             {decided, http.Header{"Impersonate-User": {"alice"}, "Impersonate-Group": {"devs", "system:masters"}}, false},
		"an Authorization added":     {decided, http.Header{"Impersonate-User": {"alice"}, "Impersonate-Group": {"devs"}, "Authorization": {"Bearer x"}}, false},
		"a non-canonical duplicate":  {decided, http.Header{"Impersonate-User": {"alice"}, "Impersonate-Group": {"devs"}, "impersonate-user": {"admin"}}, false},
		"exactly the decision":       {decided, decided.Clone(), true},
		"anonymous, nothing":         {http.Header{}, http.Header{"Accept": {"*/*"}}, true},
		"anonymous with an identity": {http.Header{}, http.Header{"X-Remote-User": {"admin"}}, false},
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
