// Package server is the local credential proxy's request path: it takes a
// request from a client on this machine (kubectl, a controller, an IDE),
// checks the proxy's local secret, and forwards it to the context's API
// server with the context's current credential generation.
//
// The client's credential is the constant local secret, so a renewal never
// changes anything the client holds, and client-go never cuts its streams.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/pinniped-kit/pinniped/agent/apis/proxybuffer"
	"github.com/pinniped-kit/pinniped/agent/apis/proxyheaders"
	"github.com/pinniped-kit/pinniped/cli/localproxy/upstream"
)

// Target is one kubeconfig context the proxy serves, under /ctx/<Slug>/.
type Target struct {
	Context, Slug string
	// Upstream is the API server's base URL.
	Upstream *url.URL
	// Holder has the current credential generation.
	Holder *upstream.Holder
	// State says why no credential is ready (e.g. a person must log in),
	// and whether one is on its way without anybody's help (soon); it is
	// asked only when a request finds none. Nil means no reason is known.
	State func() (soon bool, why string)
}

// PathPrefix is the path under which each context is served:
// PathPrefix + slug is the context's server URL path in a kubeconfig.
const PathPrefix = "/ctx/"

// RetryAfter is what a client is told to wait when a context's credential
// is on its way without a person. client-go retries a 5xx that carries
// Retry-After up to ten times, so it is sent only then: a context waiting
// for a login, or failing, must answer at once, not after a minute of
// retries.
const RetryAfter = 5 * time.Second

type handler struct {
	secret  []byte
	targets map[string]*route
	served  string
	log     *slog.Logger
	// pastSecret is the request path of a request that carried the
	// secret: serve, behind the checks given with AfterSecret.
	pastSecret http.Handler
	// buffers are shared by every context's reverse proxy.
	buffers proxybuffer.Pool
}

// Option changes the handler New builds.
type Option func(*handler)

// AfterSecret puts check between the local secret and the rest of the
// request path: check sees only requests that carried the right secret, and
// nothing else of the path runs unless check calls the handler it wraps.
// Why there and not in front of New: a check that costs something (peer's
// scan of the kernel's socket tables) must not be one that any local
// process can trigger by connecting without the secret. Checks given first
// run first.
func AfterSecret(check func(http.Handler) http.Handler) Option {
	return func(h *handler) { h.pastSecret = check(h.pastSecret) }
}

type route struct {
	t     *Target
	proxy *httputil.ReverseProxy
}

// New is the proxy's handler. It checks Authorization: Bearer <secret> in
// constant time, refuses hop-by-hop tricks, routes /ctx/<slug>/ to its
// target, strips every identity the client sent, and forwards with the
// target's current credential generation, captured once per request so a
// request and its upgrade use one credential. A context without a usable
// credential is answered 503 at once, never held. The checks given with
// AfterSecret run right after the secret, before anything else.
func New(secret []byte, targets []*Target, log *slog.Logger, opts ...Option) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &handler{secret: slices.Clone(secret), targets: map[string]*route{}, log: log}
	var names []string
	for _, t := range targets {
		h.targets[t.Slug] = &route{t: t, proxy: h.reverseProxy(t)}
		names = append(names, fmt.Sprintf("%q at %s%s", t.Context, PathPrefix, t.Slug))
	}
	slices.Sort(names)
	h.served = strings.Join(names, ", ")
	h.pastSecret = http.HandlerFunc(h.serve)
	// Wrapped last to first, so that the first check given is the
	// outermost and runs first.
	for _, o := range slices.Backward(opts) {
		o(h)
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(h.secret) == 0 {
		// Fail closed: an empty secret would match an empty token.
		WriteStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "the pinniped proxy has no local secret; restart it")
		return
	}
	if msg, ok := h.authorized(r.Header); !ok {
		h.log.Info("refused a request without the local secret", "remote", r.RemoteAddr, "reason", msg)
		WriteStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, msg)
		return
	}
	h.pastSecret.ServeHTTP(w, r)
}

// serve is the request path of a request that carried the secret and
// passed the checks after it.
func (h *handler) serve(w http.ResponseWriter, r *http.Request) {
	if token, bad := proxyheaders.HopByHopProblem(r.Header); bad {
		h.log.Info("refused a request whose Connection header names another header", "remote", r.RemoteAddr, "token", token)
		WriteStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("the Connection header may name only upgrade, close or keep-alive, not %q", token))
		return
	}
	if name, ok := proxyheaders.ImpersonationRequested(r.Header); ok {
		// Stripping it would run the request as the proxy's user while the
		// client believes it acts as someone else (kubectl auth can-i --as).
		WriteStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("the pinniped proxy acts only as its own user and does not pass on impersonation (%s, as kubectl --as sends); "+
				"use the context's original kubeconfig to impersonate", http.CanonicalHeaderKey(name)))
		return
	}
	if proxyheaders.WebSocketBearer(r.Header) {
		WriteStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			"the pinniped proxy takes no bearer token in a WebSocket subprotocol: it sends the context's own credential")
		return
	}

	rt, rest, ok := h.route(r.URL)
	if !ok {
		WriteStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("no context is served at %s; this pinniped proxy serves %s", r.URL.Path, h.served))
		return
	}
	g := rt.t.Holder.Load()
	if g == nil || expired(g) {
		why, soon := "it has no valid credential yet", false
		if rt.t.State != nil {
			var msg string
			if soon, msg = rt.t.State(); msg != "" {
				why = msg
			}
		}
		if soon {
			w.Header().Set("Retry-After", fmt.Sprint(int(RetryAfter.Seconds())))
		}
		WriteStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			fmt.Sprintf("context %q of the pinniped proxy: %s", rt.t.Context, why))
		return
	}

	out := r.WithContext(context.WithValue(r.Context(), generationKey{}, g))
	u := *r.URL
	u.Path, u.RawPath = rest.Path, rest.RawPath
	out.URL = &u
	rt.proxy.ServeHTTP(w, out)
}

// authorized checks the one Authorization header against the local secret.
// The message says what is wrong without echoing what was sent.
func (h *handler) authorized(hdr http.Header) (string, bool) {
	vals := hdr.Values("Authorization")
	if len(vals) == 0 {
		return "this is a pinniped proxy and the request has no secret: use a kubeconfig written by `pinniped proxy`", false
	}
	if len(vals) != 1 {
		return "this is a pinniped proxy and the request has more than one Authorization header: send only its secret", false
	}
	const scheme = "bearer "
	v := vals[0]
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "this is a pinniped proxy and the request has no bearer secret: use a kubeconfig written by `pinniped proxy`", false
	}
	if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(v[len(scheme):])), h.secret) != 1 {
		return "the secret does not match: this is not your pinniped proxy, or it was restarted; use the kubeconfig it wrote", false
	}
	return "", true
}

// route finds the target and the upstream path of a request: /ctx/<slug>
// and what follows it, escaped as it came.
func (h *handler) route(u *url.URL) (*route, *url.URL, bool) {
	ep := u.EscapedPath()
	if !strings.HasPrefix(ep, PathPrefix) {
		return nil, nil, false
	}
	slug, after, _ := strings.Cut(ep[len(PathPrefix):], "/")
	rt, ok := h.targets[slug]
	if !ok {
		return nil, nil, false
	}
	// Not url.Parse: a rest that starts with // would become a host.
	p, err := url.PathUnescape("/" + after)
	if err != nil {
		return nil, nil, false
	}
	return rt, &url.URL{Path: p, RawPath: "/" + after}, true
}

func expired(g *upstream.Generation) bool {
	exp := g.Cred.ExpirationTimestamp
	return !exp.IsZero() && !time.Now().Before(exp)
}

type generationKey struct{}

// errNoGeneration means a request reached the transport without the
// generation captured for it: a bug, and nothing is sent.
var errNoGeneration = errors.New("the request has no credential generation")

// generationTransport sends a request with the generation captured when it
// arrived, so the request and its upgrade, however long they run, use one
// credential. The generation's own transport is the fail-closed check:
// it refuses any identity but the generation's own token (set by the
// Rewrite; a certificate's generation accepts none).
type generationTransport struct{}

func (generationTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	g, ok := r.Context().Value(generationKey{}).(*upstream.Generation)
	if !ok || g == nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, errNoGeneration
	}
	return g.RoundTripper(httpstream.IsUpgradeRequest(r)).RoundTrip(r)
}

func (h *handler) reverseProxy(t *Target) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		// Stripping happens here because nothing of the reverse proxy runs
		// after Rewrite but the transport, which checks that the request
		// carries the generation's credential and no other identity.
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(t.Upstream)
			proxyheaders.StripIdentityHeaders(r.Out.Header)
			if g, ok := r.In.Context().Value(generationKey{}).(*upstream.Generation); ok && g != nil {
				g.Authorize(r.Out.Header)
			}
		},
		Transport:      generationTransport{},
		BufferPool:     &h.buffers,
		ModifyResponse: func(resp *http.Response) error { return keepLocationInContext(t, resp) },
		// No timed flushing: the reverse proxy flushes every write of a
		// response of unknown length (watches, logs -f) at once by itself.
		FlushInterval: 0,
		// r here is the outgoing request, which may carry the context's
		// token: never log it or its headers.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, upstream.ErrIdentityHeader) || errors.Is(err, errNoGeneration) {
				h.log.Error("refused to forward a request that would not carry exactly the context's credential", "context", t.Context, "error", err)
				WriteStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "the pinniped proxy refused to forward this request")
				return
			}
			if errors.Is(err, errForeignRedirect) {
				h.log.Info("refused an API server's redirect out of its context", "context", t.Context)
				WriteStatus(w, http.StatusBadGateway, metav1.StatusReasonInternalError,
					fmt.Sprintf("the API server of context %q redirected the request outside that API server; the pinniped proxy does not pass such a redirect on", t.Context))
				return
			}
			h.log.Info("API server unreachable", "context", t.Context, "error", err)
			WriteStatus(w, http.StatusBadGateway, metav1.StatusReasonServiceUnavailable,
				fmt.Sprintf("the pinniped proxy could not reach the API server of context %q: %v", t.Context, err))
		},
	}
}

// errForeignRedirect means an API server redirected a client to a place
// that is not on that API server.
var errForeignRedirect = errors.New("the API server redirected outside itself")

// keepLocationInContext maps a Location that names a place on the
// context's API server to the same place under the context's prefix, and
// refuses a redirect anywhere else. Why: every context shares the proxy's
// origin and secret, and clients follow redirects with their credential
// (client-go sets it on every request it sends), so a Location of
// /ctx/<other>/... passed on as sent would let one API server, or anything
// whose responses it passes on (an aggregated API, a service proxy), send
// the user's request to another context, with that context's credential;
// a Location on another host would get the local secret sent there.
func keepLocationInContext(t *Target, resp *http.Response) error {
	locs := resp.Header.Values("Location")
	if len(locs) == 0 {
		return nil
	}
	redirect := resp.StatusCode >= 300 && resp.StatusCode < 400
	sent := t.Upstream
	if resp.Request != nil && resp.Request.URL != nil {
		sent = resp.Request.URL
	}
	mapped := make([]string, 0, len(locs))
	for _, loc := range locs {
		m, ok := localLocation(t.Upstream, sent, t.Slug, loc)
		if !ok {
			if redirect {
				return errForeignRedirect
			}
			// A client does not follow it; it would only name a place the
			// client cannot reach through this proxy.
			continue
		}
		mapped = append(mapped, m)
	}
	resp.Header.Del("Location")
	for _, m := range mapped {
		resp.Header.Add("Location", m)
	}
	return nil
}

// localLocation resolves loc as the client would have against the API
// server, and returns it under the context's prefix when it is on that API
// server, below its base path.
func localLocation(up, sent *url.URL, slug, loc string) (string, bool) {
	u, err := sent.Parse(loc)
	if err != nil || u.Scheme != sent.Scheme || !strings.EqualFold(u.Host, sent.Host) || u.User != nil {
		return "", false
	}
	base := strings.TrimSuffix(up.EscapedPath(), "/")
	p := u.EscapedPath()
	if !strings.HasPrefix(p, base) {
		return "", false
	}
	p = p[len(base):]
	if p != "" && p[0] != '/' {
		return "", false
	}
	out := &url.URL{Path: PathPrefix + slug + p, RawQuery: u.RawQuery, Fragment: u.Fragment}
	if pp, err := url.PathUnescape(out.Path); err == nil {
		out.RawPath, out.Path = out.Path, pp
	}
	return out.String(), true
}

// WriteStatus answers with a Kubernetes Status, which kubectl and client-go
// show as the error message.
func WriteStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg, //nolint:gosec // HTTP codes fit
	})
}
