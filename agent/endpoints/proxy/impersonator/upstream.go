package impersonator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// Transports are the four ways the proxy talks to the API server.
type Transports struct {
	// Impersonating and ImpersonatingUpgrade are for impersonated users:
	// they carry no credential themselves; each request carries
	// ImpersonatorToken (Proxy.ImpersonatorToken). The second speaks
	// HTTP/1.1 for upgrades.
	Impersonating, ImpersonatingUpgrade http.RoundTripper
	// ImpersonatorToken is the impersonation ServiceAccount's token,
	// cached until shortly before it expires (ServiceAccountTokens).
	ImpersonatorToken oauth2.TokenSource
	// Direct and DirectUpgrade carry no credentials of the agent's.
	Direct, DirectUpgrade http.RoundTripper
}

// NewTransports builds the transports from the agent's client config (only
// its server and CA are used) and a token source for the ServiceAccount
// that may do nothing but impersonate. The agent's own, broader credentials
// never reach a proxied request: impersonation fails open (a request whose
// Impersonate-* headers went missing runs as the caller), so the identity
// behind it must be powerless on its own. No transport carries a
// credential: every request brings its own (the ServiceAccount's token
// with Impersonate-* headers, or the client's token), so the impersonating
// and the direct requests share connections as client-go's transport cache
// would have them share anyway.
//
// Reads that end soon (GET and HEAD without a body; not isStream's) go over
// client-go's HTTP/1.1 transport
// (the one upgrades use: kept-alive connections, the CA file re-read as it
// rotates), up to requestConns at once; everything else over HTTP/2. Go's
// HTTP/1.1 costs the proxy and the API server less CPU per request than
// its HTTP/2 (BenchmarkList; docs/benchmarks.md). Open watches, however
// many, still share a few connections. Writes stay on HTTP/2: a kept-alive
// HTTP/1.1 connection can close just as a request goes out on it, and
// Go's transport then sends it again only if its method is safe and its
// body can be read again (as these reads'), while an API server closing an
// HTTP/2 connection announces it (GOAWAY) and new requests go to another
// at once.
func NewTransports(base *rest.Config, impersonator oauth2.TokenSource) (*Transports, error) {
	h2 := rest.AnonymousClientConfig(base)
	h1 := rest.AnonymousClientConfig(base)
	// SPDY and WebSocket upgrades exist only in HTTP/1.1; offering only it
	// in ALPN also keeps client-go from adding HTTP/2.
	h1.NextProtos = []string{"http/1.1"}
	streams, err := rest.TransportFor(h2)
	if err != nil {
		return nil, fmt.Errorf("transport to the API server: %w", err)
	}
	upgrades, err := rest.TransportFor(h1)
	if err != nil {
		return nil, fmt.Errorf("transport to the API server: %w", err)
	}
	split := &byDuration{requests: upgrades, streams: streams, limit: requestConns}
	return &Transports{
		Impersonating: split, ImpersonatingUpgrade: upgrades, Direct: split, DirectUpgrade: upgrades,
		ImpersonatorToken: transport.NewCachedTokenSource(impersonator),
	}, nil
}

// requestConns is how many requests at once go over HTTP/1.1: client-go's
// transport keeps 25 idle connections to a host, so that many requests in
// flight reuse kept-alive connections. Any more would each open one and
// close it afterwards, a TLS handshake per request at both ends, and would
// leave the number of connections to the API server up to the clients;
// they go over HTTP/2 instead.
const requestConns = 25

// byDuration sends reads that end soon over HTTP/1.1, up to its limit at
// once, and every other request over HTTP/2. Either carries any request
// correctly: the choice decides what a request costs, how many
// connections it holds, and whether a request on a connection closing
// under it is sent again.
type byDuration struct {
	requests, streams http.RoundTripper
	limit             int64
	// inFlight counts the requests on HTTP/1.1 until their responses are
	// closed, as the connection is held until then.
	inFlight atomic.Int64
}

func (b *byDuration) RoundTrip(r *http.Request) (*http.Response, error) {
	if !replayable(r) || isStream(r.URL) {
		return b.streams.RoundTrip(r)
	}
	if b.inFlight.Add(1) > b.limit {
		b.inFlight.Add(-1)
		return b.streams.RoundTrip(r)
	}
	resp, err := b.requests.RoundTrip(r)
	if err != nil {
		b.inFlight.Add(-1)
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Never asked for (upgrades take their own transport), and its
		// body must stay the connection the reverse proxy takes over.
		b.inFlight.Add(-1)
		return resp, nil
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, count: &b.inFlight}
	return resp, nil
}

// replayable is a read Go's HTTP/1.1 transport sends again on another
// connection when the one it chose turns out closed: GET or HEAD without a
// body (its rule takes a few more; the proxy needs only these).
func replayable(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.Body == nil || r.Body == http.NoBody)
}

// countedBody takes its request off the count when it is closed, once.
type countedBody struct {
	io.ReadCloser
	count  *atomic.Int64
	closed atomic.Bool
}

func (c *countedBody) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.count.Add(-1)
	}
	return c.ReadCloser.Close()
}

// isStream reports whether a request may stay open: a watch (the watch
// parameter, or the old /watch/ paths), a followed log, the proxy
// subresource (pods, services, nodes), or a CPU profile of the API server.
// The parameters are read as the API server reads them: the name decoded,
// the first value false only as "0" or "false" in any case.
func isStream(u *url.URL) bool {
	if strings.Contains(u.Path, "/watch/") || strings.Contains(u.Path, "/proxy/") || strings.HasSuffix(u.Path, "/proxy") ||
		strings.HasPrefix(u.Path, "/debug/pprof/") {
		return true
	}
	if u.RawQuery == "" {
		return false
	}
	q := u.Query()
	for _, k := range []string{"watch", "follow"} {
		if vs := q[k]; len(vs) > 0 && vs[0] != "0" && !strings.EqualFold(vs[0], "false") {
			return true
		}
	}
	return false
}

// UpstreamURL is the API server's base URL from a client config.
func UpstreamURL(cfg *rest.Config) (*url.URL, error) {
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("API server address %q is not a URL", cfg.Host)
	}
	return u, nil
}

// ServiceAccountTokens issues short-lived tokens for one ServiceAccount
// through the TokenRequest API, so no long-lived token Secret exists.
type ServiceAccountTokens struct {
	ServiceAccounts corev1client.ServiceAccountInterface
	Name            string
	Lifetime        time.Duration
}

// Token implements oauth2.TokenSource. The token is reported to expire at
// 80% of its life, so it is replaced well before the API server refuses it.
func (s *ServiceAccountTokens) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	life := s.Lifetime
	if life == 0 {
		life = time.Hour
	}
	secs := int64(life.Seconds())
	issued := time.Now()
	tr, err := s.ServiceAccounts.CreateToken(ctx, s.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request a token for ServiceAccount %s (the agent needs create on serviceaccounts/token for it): %w", s.Name, err)
	}
	if got := tr.Status.ExpirationTimestamp.Sub(issued); got > 0 {
		life = got
	}
	return &oauth2.Token{AccessToken: tr.Status.Token, TokenType: "Bearer", Expiry: issued.Add(life * 8 / 10)}, nil
}
