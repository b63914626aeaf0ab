package impersonator

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
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
// Requests that end soon go over a pool of kept-alive HTTP/1.1
// connections, and streams (watches, followed logs) over HTTP/2: Go's
// HTTP/1.1 costs both ends less CPU per request than its HTTP/2 (measured
// in BenchmarkList and in make bench-proxy), while a thousand open watches
// still share a few connections instead of holding one each.
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
	requests, err := requestPool(h1)
	if err != nil {
		return nil, fmt.Errorf("transport to the API server: %w", err)
	}
	split := &byDuration{requests: requests, streams: streams}
	return &Transports{
		Impersonating: split, ImpersonatingUpgrade: upgrades, Direct: split, DirectUpgrade: upgrades,
		ImpersonatorToken: transport.NewCachedTokenSource(impersonator),
	}, nil
}

// requestIdleConns is how many kept-alive HTTP/1.1 connections the proxy
// holds to the API server: as many requests as that can be in flight at
// once without a new TLS handshake each (client-go's own pool keeps 25).
const requestIdleConns = 128

// requestPool is an HTTP/1.1 transport like client-go's for cfg (its TLS,
// dialer and proxy settings), with a pool of requestIdleConns.
func requestPool(cfg *rest.Config) (http.RoundTripper, error) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	t := &http.Transport{
		TLSClientConfig: tlsConfig, TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: requestIdleConns, Proxy: cfg.Proxy, DialContext: cfg.Dial,
	}
	if t.DialContext == nil {
		t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	// client-go's defaults (NO_PROXY with CIDRs, idle timeout); it adds no
	// HTTP/2, as the TLS config offers only http/1.1.
	return utilnet.SetTransportDefaults(t), nil
}

// byDuration sends streams over HTTP/2 and every other request over the
// HTTP/1.1 pool. Either carries any request correctly: the choice only
// decides how many connections a long request holds.
type byDuration struct {
	requests, streams http.RoundTripper
}

func (b *byDuration) RoundTrip(r *http.Request) (*http.Response, error) {
	if isStream(r.URL) {
		return b.streams.RoundTrip(r)
	}
	return b.requests.RoundTrip(r)
}

// isStream reports whether a request may stay open: a watch (the watch
// parameter, or the old /watch/ paths) or a followed log. The parameter is
// read as the API server reads a boolean: its first value, false only as
// "0" or "false" in any case.
func isStream(u *url.URL) bool {
	if strings.Contains(u.Path, "/watch/") {
		return true
	}
	if !strings.Contains(u.RawQuery, "watch") && !strings.Contains(u.RawQuery, "follow") {
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
