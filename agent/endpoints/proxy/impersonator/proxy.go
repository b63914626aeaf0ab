// Package impersonator is the core of the impersonation proxy: it
// authenticates a client, decides whom to impersonate, removes every header
// a client could use to smuggle an identity, and forwards the request to the
// real API server with the agent's own credentials and Impersonate-*
// headers. Serving, certificates and the Service around it live elsewhere.
package impersonator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/oauth2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/apis/proxybuffer"
	"github.com/pinniped-kit/pinniped/agent/apis/proxyheaders"
	"github.com/pinniped-kit/pinniped/agent/authentication/identityrule"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
	"github.com/pinniped-kit/pinniped/agent/plumbing/observe"
)

// OriginalUserExtra records who asked for a nested impersonation, in the
// same extra key upstream Pinniped uses, so audit logs show the real person.
// It is the default suffix's spelling (groupsuffix.OriginalUserExtra); a
// Proxy under another suffix uses Proxy.OriginalUserKey.
const OriginalUserExtra = "original-user-info.impersonation-proxy.concierge.pinniped.dev"

// Request is what a client asked to be seen as (kubectl --as/--as-group/...).
type Request struct {
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Authorizer decides nested impersonation as the real user, e.g. with a
// SubjectAccessReview per impersonated attribute.
type Authorizer interface {
	CanImpersonate(ctx context.Context, real user.Info, want *Request) (allowed bool, reason string, err error)
}

// Proxy forwards authenticated requests.
type Proxy struct {
	Upstream *url.URL
	// Transport talks to the API server for impersonated users
	// (Transports.Impersonating: HTTP/1.1 for reads that end soon, HTTP/2
	// for the rest).
	Transport http.RoundTripper
	// ImpersonatorToken is the credential of the ServiceAccount that may
	// only impersonate, sent with each impersonated request
	// (Transports.ImpersonatorToken). Tests whose upstream needs no
	// credential leave it unset.
	ImpersonatorToken oauth2.TokenSource
	// UpgradeTransport is HTTP/1.1 for exec, attach and port-forward
	// (SPDY and WebSocket upgrades do not exist in HTTP/2).
	UpgradeTransport http.RoundTripper
	// Authn authenticates client certificates; those users are impersonated.
	Authn authenticator.Request
	// Tokens authenticates bearer tokens (e.g. ServiceAccount tokens). Those
	// requests go upstream with the client's own token and no impersonation:
	// the TokenReview that accepted the token is the API server's own view of
	// the same user, and impersonating it would lose what only the token
	// carries (its UID, bound-pod extras). nil refuses bearer tokens.
	Tokens authenticator.Request
	// ProxyTokens decides bearer tokens the agent issued for this proxy;
	// their users are impersonated, as certificate users are. A client
	// certificate still wins over such a token. nil refuses them (a token
	// of ours still never goes to TokenReview) and sends every other bearer
	// token to Tokens.
	ProxyTokens ProxyTokenAuthenticator
	// DirectTransport and DirectUpgradeTransport carry no agent credentials:
	// they forward token users and anonymous requests, so the API server
	// decides about them exactly as if they came directly. nil refuses
	// token and anonymous requests.
	DirectTransport, DirectUpgradeTransport http.RoundTripper
	Authz                                   Authorizer
	// Log is required: set once where the proxy is built.
	Log *slog.Logger
	// Observe, when set, is told about every request (metrics, audit).
	Observe func(observe.ProxyRequest)
	// OriginalUserKey is the extra that records the real user of a nested
	// impersonation, and that clients may not set themselves; empty means
	// OriginalUserExtra. Under an API group suffix it carries that suffix,
	// as upstream's does.
	OriginalUserKey string

	proxy, upgradeProxy, direct, directUpgrade *httputil.ReverseProxy
	buffers                                    proxybuffer.Pool
}

// Init builds the reverse proxies; call once before serving.
func (p *Proxy) Init() {
	mk := func(rt http.RoundTripper, impersonate bool) *httputil.ReverseProxy {
		return &httputil.ReverseProxy{
			// The identity headers are set here because nothing of the
			// reverse proxy runs after Rewrite: headers set before ServeHTTP
			// are still subject to its hop-by-hop removal, which deletes
			// every header the client names in Connection.
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(p.Upstream)
				r.Out.Host = p.Upstream.Host
				proxyheaders.StripIdentityHeaders(r.Out.Header)
				if id, ok := assertedIdentity(r.In.Context()); ok {
					for k, vs := range id {
						r.Out.Header[k] = slices.Clone(vs)
					}
				}
			},
			Transport:  &identityCheck{next: rt, impersonate: impersonate},
			BufferPool: &p.buffers,
			// No timed flushing: the reverse proxy flushes every write of a
			// response of unknown length (watches, logs -f, streamed lists)
			// at once by itself, and responses of known length go out in
			// as few writes as their size allows.
			FlushInterval: 0,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if errors.Is(err, errIdentityMismatch) {
					p.Log.Error("refused to forward a request whose identity headers are not the ones the proxy set", "path", r.URL.Path, "error", err)
					writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "the impersonation proxy refused to forward this request")
					return
				}
				p.Log.Info("upstream API server unreachable", "path", r.URL.Path, "error", err)
				writeStatus(w, http.StatusBadGateway, metav1.StatusReasonServiceUnavailable, "the impersonation proxy could not reach the API server")
			},
		}
	}
	p.proxy, p.upgradeProxy = mk(p.Transport, true), mk(p.UpgradeTransport, true)
	if p.DirectTransport != nil && p.DirectUpgradeTransport != nil {
		p.direct, p.directUpgrade = mk(p.DirectTransport, false), mk(p.DirectUpgradeTransport, false)
	}
}

// ServeHTTP implements the proxy.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	obs := observe.ProxyRequest{Verb: r.Method, Path: r.URL.Path, Method: observe.MethodRefused}
	if httpstream.IsUpgradeRequest(r) {
		obs.Upgrade = r.Header.Get("Upgrade")
	}
	defer func() {
		if p.Observe != nil {
			obs.Code, obs.Duration = rec.code, time.Since(start)
			p.Observe(obs)
		}
	}()
	w = rec

	if token, bad := proxyheaders.HopByHopProblem(r.Header); bad {
		p.Log.Info("refused a request whose Connection header names another header", "remote", r.RemoteAddr, "token", token)
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("the Connection header may name only upgrade, close or keep-alive, not %q", token))
		return
	}

	if proxyTokenInWebSocketProtocol(r.Header) {
		p.Log.Info("refused a proxy token", "remote", r.RemoteAddr, "reason", "in a WebSocket subprotocol")
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized,
			"the impersonation proxy accepts its own tokens only in the Authorization header")
		return
	}

	// A certificate wins over any Authorization header sent with it: the
	// header is then stripped, never forwarded.
	resp, ok, err := p.Authn.AuthenticateRequest(r)
	if err == nil && ok && resp != nil && resp.User != nil && resp.User.GetName() != "" {
		obs.Method, obs.Username = observe.MethodCertificate, resp.User.GetName()
		p.impersonate(w, r, resp.User, &obs)
		return
	}
	if err != nil || (r.TLS != nil && len(r.TLS.PeerCertificates) > 0) {
		p.Log.Info("refused a client certificate", "remote", r.RemoteAddr, "error", err)
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		return
	}
	if auth, hasToken := bearerToken(r.Header); hasToken {
		if !p.serveProxyToken(w, r, auth, &obs) {
			p.serveBearer(w, r, &obs)
		}
		return
	}
	if p.direct == nil {
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		return
	}
	// Anonymous: the API server applies its own anonymous-auth setting.
	obs.Method = observe.MethodAnonymous
	p.forwardDirect(w, r, false)
}

// serveProxyToken decides a request whose bearer token is one of ours, and
// reports whether it was (false: the token is someone else's to decide).
// A token of ours is decided only here: never sent to TokenReview (the API
// server cannot know it) and never forwarded. Its user is impersonated as
// a certificate's is, so the Authorization header is stripped on the way
// out like every client-sent identity. The API server reads the first word
// after "Bearer"; a client could hide a token of ours behind another word
// and have it reviewed or forwarded: such a header is decided here too.
func (p *Proxy) serveProxyToken(w http.ResponseWriter, r *http.Request, auth string, obs *observe.ProxyRequest) bool {
	words := strings.Fields(auth[len("bearer "):])
	var resp *authenticator.Response
	var ours bool
	var err error
	if len(words) > 1 && slices.ContainsFunc(words, proxytoken.Ours) {
		ours, err = true, errProxyTokenNotAlone
	} else {
		resp, ours, err = p.proxyTokens().AuthenticateProxyToken(words[0])
	}
	if !ours {
		return false
	}
	if err != nil || resp == nil || resp.User == nil || resp.User.GetName() == "" {
		p.Log.Info("refused a proxy token", "remote", r.RemoteAddr, "reason", proxyTokenRefusal(err))
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		return true
	}
	obs.Method, obs.Username = observe.MethodProxyToken, resp.User.GetName()
	p.impersonate(w, r, resp.User, obs)
	return true
}

// serveBearer decides a request with someone else's bearer token (a
// ServiceAccount's, an OIDC token the API server accepts): TokenReview
// says whether it is valid, and the request goes on as it came, with the
// client's own token and no impersonation.
func (p *Proxy) serveBearer(w http.ResponseWriter, r *http.Request, obs *observe.ProxyRequest) {
	if p.Tokens == nil || p.direct == nil {
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		return
	}
	// bearertoken.Authenticator deletes the header it consumed, so ask
	// with a copy and forward the original.
	probe := r.Clone(r.Context())
	tr, ok, err := p.Tokens.AuthenticateRequest(probe)
	if err != nil || !ok || tr == nil || tr.User == nil {
		if err != nil {
			p.Log.Info("refused a bearer token", "remote", r.RemoteAddr, "error", err)
		}
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		return
	}
	obs.Method, obs.Username = observe.MethodToken, tr.User.GetName()
	p.forwardDirect(w, r, true)
}

// noProxyTokens has no keys: it refuses every token of ours.
var noProxyTokens = &ProxyTokens{}

func (p *Proxy) proxyTokens() ProxyTokenAuthenticator {
	if p.ProxyTokens != nil {
		return p.ProxyTokens
	}
	return noProxyTokens
}

// impersonate forwards the request of a certificate's or a proxy token's
// user with the agent's credentials and Impersonate-* headers.
func (p *Proxy) impersonate(w http.ResponseWriter, r *http.Request, real user.Info, obs *observe.ProxyRequest) {
	target, err := p.target(r, real)
	if err != nil {
		var denied *deniedError
		if errors.As(err, &denied) {
			writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, err.Error())
			return
		}
		p.Log.Error("impersonation check failed", "error", err)
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "could not check the requested impersonation")
		return
	}
	if target.GetName() != real.GetName() {
		obs.ImpersonatedUser = target.GetName()
	}
	id := http.Header{}
	if err := setImpersonation(id, target); err != nil {
		p.Log.Info("refused to impersonate a user the API server would see as someone else", "remote", r.RemoteAddr, "reason", err)
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, err.Error())
		return
	}
	if proxyheaders.WebSocketBearer(r.Header) {
		// The API server reads a WebSocket bearer token when the
		// Authorization header fails it: were the proxy's own token ever
		// refused, the impersonation would run with the rights of whoever
		// that token is.
		p.Log.Info("refused a bearer token in a WebSocket subprotocol with an impersonated identity", "remote", r.RemoteAddr)
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			"a bearer token in a WebSocket subprotocol cannot go with a client certificate or a token of the impersonation proxy: send one credential")
		return
	}
	if p.ImpersonatorToken != nil {
		// Set with the identity it acts for, not by a transport wrapper,
		// which would copy the whole request again to add one header.
		tok, err := p.ImpersonatorToken.Token()
		if err != nil || tok == nil || tok.AccessToken == "" {
			if err == nil {
				err = errors.New("the token source returned no token")
			}
			p.Log.Error("no token for the impersonation ServiceAccount", "error", err)
			w.Header().Set("Retry-After", "1")
			writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the impersonation proxy has no credential for the API server right now: try again shortly")
			return
		}
		id.Set("Authorization", "Bearer "+tok.AccessToken)
	}
	out := withIdentity(r, id)
	if httpstream.IsUpgradeRequest(r) {
		p.upgradeProxy.ServeHTTP(w, out)
		return
	}
	p.proxy.ServeHTTP(w, out)
}

// forwardDirect forwards with no agent credentials: the client's own bearer
// token (when withToken) and its own nested-impersonation request, which the
// API server authorizes itself. Everything else identity-like is stripped.
func (p *Proxy) forwardDirect(w http.ResponseWriter, r *http.Request, withToken bool) {
	want, err := requested(r.Header)
	if err != nil {
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, err.Error())
		return
	}
	if want != nil {
		if key, reserved := reservedExtra(want.Extra); reserved {
			writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, "the extra "+key+" is reserved for the impersonation proxy")
			return
		}
	}
	auth, _ := bearerToken(r.Header)
	id := http.Header{}
	if withToken {
		id.Set("Authorization", auth)
	}
	if want != nil {
		if err := setImpersonation(id, &user.DefaultInfo{Name: want.User, UID: want.UID, Groups: want.Groups, Extra: want.Extra}); err != nil {
			p.Log.Info("refused to impersonate a user the API server would see as someone else", "remote", r.RemoteAddr, "reason", err)
			writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, err.Error())
			return
		}
	}
	out := withIdentity(r, id)
	if httpstream.IsUpgradeRequest(r) {
		p.directUpgrade.ServeHTTP(w, out)
		return
	}
	p.direct.ServeHTTP(w, out)
}

// bearerToken returns the whole Authorization header when it carries a
// bearer token.
func bearerToken(h http.Header) (string, bool) {
	v := h.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") && strings.TrimSpace(v[7:]) != "" {
		return v, true
	}
	return "", false
}

// statusRecorder remembers the response code for Observe, and keeps the
// Flusher and Hijacker the reverse proxy needs for watches and upgrades.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be hijacked")
	}
	s.code = http.StatusSwitchingProtocols
	return h.Hijack()
}

type deniedError struct{ msg string }

func (e *deniedError) Error() string { return e.msg }

// target is whom the API server should see: the authenticated user, or,
// for a permitted nested impersonation, the requested identity with the
// real user recorded in an extra.
func (p *Proxy) target(r *http.Request, real user.Info) (user.Info, error) {
	want, err := requested(r.Header)
	if err != nil {
		return nil, &deniedError{msg: err.Error()}
	}
	if want == nil {
		return real, nil
	}
	if key, reserved := reservedExtra(want.Extra); reserved {
		return nil, &deniedError{msg: "the extra " + key + " is reserved for the impersonation proxy"}
	}
	// Refused before any SubjectAccessReview: setImpersonation would
	// refuse it anyway, and the reviews cost the API server one each.
	if err := identityrule.Deliverable(&user.DefaultInfo{Name: want.User, UID: want.UID, Groups: want.Groups, Extra: want.Extra}); err != nil {
		return nil, &deniedError{msg: "the impersonation proxy cannot name the requested user to the API server: its " + err.Error()}
	}
	if p.Authz == nil {
		return nil, &deniedError{msg: "nested impersonation is not enabled on this proxy"}
	}
	allowed, reason, err := p.Authz.CanImpersonate(r.Context(), real, want)
	if err != nil {
		return nil, err
	}
	if !allowed {
		msg := fmt.Sprintf("%s may not impersonate %s", real.GetName(), want.User)
		if reason != "" {
			msg += ": " + reason
		}
		return nil, &deniedError{msg: msg}
	}
	original, err := json.Marshal(map[string]any{
		"username": real.GetName(), "uid": real.GetUID(), "groups": real.GetGroups(), "extra": real.GetExtra(),
	})
	if err != nil {
		return nil, err
	}
	extra := map[string][]string{p.originalUserKey(): {string(original)}}
	for k, v := range want.Extra {
		extra[k] = v
	}
	return &user.DefaultInfo{Name: want.User, UID: want.UID, Groups: want.Groups, Extra: extra}, nil
}

func (p *Proxy) originalUserKey() string {
	if p.OriginalUserKey != "" {
		return p.OriginalUserKey
	}
	return OriginalUserExtra
}

// requested parses the client's Impersonate-* headers; nil means none.
func requested(h http.Header) (*Request, error) {
	var want Request
	seen := false
	for k, vs := range h {
		lk := strings.ToLower(k)
		switch {
		case lk == "impersonate-user":
			want.User, seen = vs[0], true
		case lk == "impersonate-uid":
			want.UID, seen = vs[0], true
		case lk == "impersonate-group":
			want.Groups, seen = append(want.Groups, vs...), true
		case strings.HasPrefix(lk, "impersonate-extra-"):
			key, err := url.PathUnescape(strings.TrimPrefix(lk, "impersonate-extra-"))
			if err != nil {
				return nil, fmt.Errorf("malformed impersonation extra header %q", k)
			}
			if want.Extra == nil {
				want.Extra = map[string][]string{}
			}
			want.Extra[key], seen = append(want.Extra[key], vs...), true
		}
	}
	if !seen {
		return nil, nil
	}
	if want.User == "" {
		return nil, errors.New("impersonating groups, a UID or extras requires Impersonate-User too")
	}
	sort.Strings(want.Groups)
	return &want, nil
}

// setImpersonation names u to the API server in Impersonate-* headers, or
// refuses (403) when a header would not carry u unchanged: the API server
// would impersonate someone else (" system:masters" arrives as
// system:masters over HTTP/1.1). Every way a user reaches here (a
// certificate, a proxy token, a nested or a direct impersonation) passes
// this one check.
func setImpersonation(h http.Header, u user.Info) error {
	if err := identityrule.Deliverable(u); err != nil {
		return &deniedError{msg: "the impersonation proxy cannot name this user to the API server: its " + err.Error()}
	}
	h.Set("Impersonate-User", u.GetName())
	if uid := u.GetUID(); uid != "" {
		h.Set("Impersonate-Uid", uid)
	}
	for _, g := range u.GetGroups() {
		// The API server adds system:authenticated itself.
		if g != user.AllAuthenticated {
			h.Add("Impersonate-Group", g)
		}
	}
	for k, vs := range u.GetExtra() {
		for _, v := range vs {
			h.Add("Impersonate-Extra-"+ExtraHeaderKey(k), v)
		}
	}
	return nil
}

// ExtraHeaderKey escapes an extra's key for an Impersonate-Extra- header
// name as client-go does: every byte that may not stand in a header name
// (RFC 9110 token), and %, becomes %XX; the API server unescapes it.
// url.PathEscape leaves ':', '=' or '@' as they are, and Go's transport
// refuses to send such a header, which would fail every request of a user
// whose identity carries such a key.
func ExtraHeaderKey(k string) string {
	var b strings.Builder
	for i := range len(k) {
		c := k[i]
		if c != '%' && c < utf8.RuneSelf && httpguts.IsTokenRune(rune(c)) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg, //nolint:gosec // HTTP codes fit
	})
}

// reservedExtra finds an extra only an impersonation proxy may set: the
// original-user key of any API group suffix, not only this proxy's, so a
// client cannot forge what another install's audit tooling reads.
func reservedExtra(extra map[string][]string) (string, bool) {
	for k := range extra {
		if groupsuffix.IsOriginalUserExtra(k) {
			return k, true
		}
	}
	return "", false
}
