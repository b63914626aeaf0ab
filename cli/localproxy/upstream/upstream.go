// Package upstream is the local credential proxy's way to one API server:
// a Generation per credential, each with its own connections, and a Holder
// that swaps the current one when the credential is renewed.
//
// Why generations: kube-apiserver checks a client certificate once, at the
// TLS handshake, so a renewed certificate needs new connections. client-go,
// when its exec plugin returns a new certificate, closes every connection
// and with them every watch, `logs -f` and `exec` the client had open. The
// local proxy instead sends new requests on new connections and lets the
// streams already running finish on the old ones.
package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/pinniped-kit/pinniped/agent/apis/proxyheaders"
	"github.com/pinniped-kit/pinniped/cache/credcache"
)

// Generation is one credential's way to the API server: its own transports,
// so new requests take new connections and old streams run to their end on
// the old ones.
type Generation struct {
	N    int
	Cred credcache.Credential

	// h2 carries ordinary requests (HTTP/2 when the server offers it); h1
	// speaks only HTTP/1.1, for SPDY and WebSocket upgrades, which exist
	// only there.
	h2, h1     *http.Transport
	h2rt, h1rt http.RoundTripper
	conns      atomic.Int64
	// authorization is "Bearer <token>" for a token, "" for a certificate.
	authorization string
}

// ErrNoCredential means a credential has neither a token nor a certificate
// and key.
var ErrNoCredential = errors.New("the credential has neither a token nor a client certificate and key")

// NewGeneration builds the transports for one credential. base names the
// server, its CA, TLS server name, proxy and dialer; any user credentials in
// it are ignored: the generation's credential is the only one it sends.
//
// The transports are our own, not rest.TransportFor's: client-go caches
// transports by TLS configuration, so two generations could otherwise
// share connections, and closing one's would cut the other's streams.
func NewGeneration(base *rest.Config, cred credcache.Credential, n int) (*Generation, error) {
	cfg := rest.AnonymousClientConfig(base)
	switch {
	case cred.Token != "":
	case cred.ClientCertificateData != "" && cred.ClientKeyData != "":
		cfg.CertData = []byte(cred.ClientCertificateData)
		cfg.KeyData = []byte(cred.ClientKeyData)
	default:
		return nil, ErrNoCredential
	}
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, fmt.Errorf("transport settings for the API server: %w", err)
	}
	tlsConfig, err := transport.TLSConfigFor(tc)
	if err != nil {
		return nil, fmt.Errorf("TLS settings for the API server (check the cluster's CA and the credential's certificate): %w", err)
	}
	if tlsConfig == nil {
		// The server is trusted through the system roots.
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}

	g := &Generation{N: n, Cred: cred}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	counting := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		g.conns.Add(1)
		return &countedConn{Conn: c, done: func() { g.conns.Add(-1) }}, nil
	}
	mk := func(tlsConfig *tls.Config) *http.Transport {
		// SetTransportDefaults is what client-go applies: the proxy from the
		// environment (with CIDRs in NO_PROXY) unless the kubeconfig names
		// one, HTTP/2 with its connection health check unless NextProtos
		// excludes it, and client-go's timeouts.
		return utilnet.SetTransportDefaults(&http.Transport{
			Proxy:               cfg.Proxy,
			DialContext:         counting,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 25,
			DisableCompression:  cfg.DisableCompression,
		})
	}
	g.h2 = mk(tlsConfig)
	h1TLS := tlsConfig.Clone()
	h1TLS.NextProtos = []string{"http/1.1"}
	g.h1 = mk(h1TLS)
	if cred.Token != "" {
		g.authorization = "Bearer " + cred.Token
	}
	g.h2rt = &guard{authorization: g.authorization, next: g.h2}
	g.h1rt = &guard{authorization: g.authorization, next: g.h1}
	return g, nil
}

// RoundTripper sends a request with this generation's credential: the
// certificate in the TLS handshake, or the token as Authorization: Bearer.
// upgrade selects the HTTP/1.1-only transport for SPDY and WebSocket.
func (g *Generation) RoundTripper(upgrade bool) http.RoundTripper {
	if upgrade {
		return g.h1rt
	}
	return g.h2rt
}

// OpenConns is how many connections of this generation are open, idle or
// in use (including hijacked upgrades).
func (g *Generation) OpenConns() int64 { return g.conns.Load() }

// CloseIdleConnections closes the connections nothing is using; a
// connection carrying a request, a stream or an upgrade is left alone.
func (g *Generation) CloseIdleConnections() {
	g.h2.CloseIdleConnections()
	g.h1.CloseIdleConnections()
}

// ErrIdentityHeader means a request reached a generation's transport
// already carrying an identity (an identity header or a WebSocket bearer
// subprotocol): the caller must strip every identity the client sent, so
// this is a bug, and the request is not sent.
var ErrIdentityHeader = errors.New("the request to the API server already carries an identity")

// guard is the last step before the wire, after the reverse proxy's own
// header handling: it fails closed on any identity but the generation's
// own, and sets the generation's token when the request does not carry it
// yet, so what reaches the API server carries exactly the generation's
// credential.
type guard struct {
	// authorization is the generation's Authorization value, built once:
	// "" for a certificate.
	authorization string
	next          http.RoundTripper
}

func (g *guard) RoundTrip(r *http.Request) (*http.Response, error) {
	carried := false
	for k, vs := range r.Header {
		if !proxyheaders.IsIdentityHeader(k) {
			continue
		}
		// Exactly this generation's token, in the one spelling Go sends
		// (Authorize set it): the request needs no copy to add it.
		if g.authorization != "" && k == "Authorization" && len(vs) == 1 && vs[0] == g.authorization {
			carried = true
			continue
		}
		return nil, refuse(r, fmt.Errorf("%w: header %s", ErrIdentityHeader, k))
	}
	if proxyheaders.WebSocketBearer(r.Header) {
		return nil, refuse(r, fmt.Errorf("%w: a bearer WebSocket subprotocol", ErrIdentityHeader))
	}
	if g.authorization == "" || carried {
		return g.next.RoundTrip(r)
	}
	out := r.Clone(r.Context())
	out.Header.Set("Authorization", g.authorization)
	return g.next.RoundTrip(out)
}

// Authorize sets this generation's token on h, a request the caller owns
// and is about to send through RoundTripper after stripping every identity
// the client sent; with a certificate it sets nothing. Setting it there
// spares the transport a copy of the whole request per request.
func (g *Generation) Authorize(h http.Header) {
	if g.authorization != "" {
		h["Authorization"] = []string{g.authorization}
	}
}

// refuse closes the body as a RoundTripper must, even on error.
func refuse(r *http.Request, err error) error {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return err
}

// countedConn decrements its generation's count once, however often it is
// closed.
type countedConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}

// DefaultRetireEvery is how often an old generation's idle connections are
// closed again until none is open.
const DefaultRetireEvery = 30 * time.Second

// Holder holds the current generation. The zero value is ready to use and
// holds none.
type Holder struct {
	cur atomic.Pointer[Generation]

	// RetireEvery overrides DefaultRetireEvery (tests).
	RetireEvery time.Duration
	// Retired, when set, is called once an old generation has no open
	// connection left and is dropped.
	Retired func(*Generation)
}

// Load returns the current generation, nil before the first credential.
func (h *Holder) Load() *Generation { return h.cur.Load() }

// Swap makes g the current generation, then retires the old one: its idle
// connections are closed at once and again every RetireEvery until none
// is open. A connection in use (a watch, logs -f, an HTTP/2 connection with
// live streams, a hijacked upgrade) is never closed here; it runs to its
// own end and is closed on the next pass after it goes idle.
func (h *Holder) Swap(g *Generation) {
	old := h.cur.Swap(g)
	if old == nil || old == g {
		return
	}
	old.CloseIdleConnections()
	if old.OpenConns() == 0 {
		h.retired(old)
		return
	}
	every := h.RetireEvery
	if every <= 0 {
		every = DefaultRetireEvery
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for range t.C {
			old.CloseIdleConnections()
			if old.OpenConns() == 0 {
				h.retired(old)
				return
			}
		}
	}()
}

func (h *Holder) retired(g *Generation) {
	if h.Retired != nil {
		h.Retired(g)
	}
}
