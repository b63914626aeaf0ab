package httpclient_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl/redirect/redirecttest"
	"github.com/pinniped-kit/pinniped/cli/httpclient"
)

// TestRedirects: the client every CLI request to an identity provider or a
// cluster goes through (code exchange, password grant, refresh, token
// exchange, TokenCredentialRequest, discovery) never resends a body over
// plain http or to another origin.
func TestRedirects(t *testing.T) {
	redirecttest.Check(t, func(ca []byte) (*http.Client, error) { return httpclient.New(ca, 10*time.Second) })
}
