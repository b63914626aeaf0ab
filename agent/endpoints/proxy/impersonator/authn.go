package impersonator

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/pinniped-kit/pinniped/agent/apis/proxyheaders"
	"github.com/pinniped-kit/pinniped/agent/authentication/chaincheck"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/verifycache"
)

// ClientCAs is the set of CAs whose client certificates the proxy accepts:
// the agent's own signer (certificates issued by TokenCredentialRequest on
// the proxy) and the cluster's client CA. Both rotate, so the pool is swapped
// whole and read per handshake.
type ClientCAs struct {
	mu   sync.RWMutex
	pool *x509.CertPool
	// pem is what pool was built from, so an unchanged Set keeps the pool
	// (and the verification cache); generation counts real changes.
	pem        []byte
	generation uint64
}

// Set replaces the trusted CAs.
func (c *ClientCAs) Set(pemBundles ...[]byte) {
	all := bytes.Join(pemBundles, []byte("\n"))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pool != nil && bytes.Equal(all, c.pem) {
		return
	}
	pool := x509.NewCertPool()
	for _, b := range pemBundles {
		pool.AppendCertsFromPEM(b)
	}
	c.pool, c.pem = pool, all
	c.generation++
}

func (c *ClientCAs) currentGeneration() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.generation
}

// VerifyOptions is what k8s.io/apiserver's x509 authenticator asks for.
func (c *ClientCAs) VerifyOptions() (x509.VerifyOptions, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.pool == nil {
		return x509.VerifyOptions{}, false
	}
	return x509.VerifyOptions{Roots: c.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, true
}

// TokenReviewCacheTTL: a bearer token's review is reused this long, so a
// busy client does not cost the API server one TokenReview per request.
const TokenReviewCacheTTL = 10 * time.Second

// NewCertAuthenticator accepts client certificates (CN is the user, O the
// groups) signed by one of cas: k8s.io/apiserver's own x509 authenticator,
// with its successes remembered per certificate (see certCache).
func NewCertAuthenticator(cas *ClientCAs) authenticator.Request {
	return &certCache{
		verify: x509request.NewDynamic(cas.VerifyOptions, x509request.CommonNameUserConversion),
		cas:    cas,
		cache:  verifycache.New[string](certCacheSize, certCacheTTL),
		now:    time.Now,
	}
}

// Sizes of the verification cache.
const (
	certCacheSize = 4096
	certCacheTTL  = time.Minute
)

// certCache skips re-verifying the same client certificate on every
// request: chain verification (an ECDSA signature check) was 70% of the
// proxy's CPU per request, and a kubectl session sends many requests with
// one certificate. Only successes are cached, for at most a minute, never
// past the NotAfter of any certificate in the chain, and only under the CA
// set they were verified with: any change of trusted CAs starts afresh
// (verifycache's model, shared with the proxy's own tokens).
type certCache struct {
	verify authenticator.Request
	cas    *ClientCAs
	cache  *verifycache.Cache[string]
	now    func() time.Time
}

func (c *certCache) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	key := chaincheck.Key(r.TLS.PeerCertificates)
	gen := c.cas.currentGeneration()
	now := c.now()
	if resp, ok := c.cache.Get(key, gen, now); ok {
		return resp, true, nil
	}
	resp, ok, err := c.verify.AuthenticateRequest(r)
	if err != nil || !ok {
		return resp, ok, err
	}
	if opts, ok := c.cas.VerifyOptions(); ok {
		if until, ok := chaincheck.Until(r.TLS.PeerCertificates, opts, now, certCacheTTL); ok {
			c.cache.Add(key, resp, gen, now, until)
		}
	}
	return resp, true, nil
}

// ProxyTokenAuthenticator decides bearer tokens in the proxy's own format
// (see proxytoken). ours reports whether tok is shaped as one of them: such
// a token is decided only here, accepted (resp) or refused (err), and never
// sent to TokenReview or forwarded.
type ProxyTokenAuthenticator interface {
	AuthenticateProxyToken(tok string) (resp *authenticator.Response, ours bool, err error)
}

// Sizes of the proxy token cache: like certCache's, it saves a signature
// check per request of a busy client.
const (
	proxyTokenCacheSize = 4096
	proxyTokenCacheTTL  = time.Minute
)

// Sizes of the proxy token refusal cache. It saves a signature check per
// request of a client that repeats a bad token: a forged one in a loop, or
// a client that keeps sending an expired or retired one. The TTL is
// kube-apiserver's for failed token authentications (10 s). It is safe to
// reuse a refusal that long because nothing but a change of keys or
// audience (the generation, which drops it at once) or the passing of time
// can change a token's verdict, and the only verdict time turns into an
// acceptance, not yet valid (nbf), is never remembered. The TTL bounds
// the rest: a wall clock stepped back under an expired token, and memory
// (refusals are kept apart from successes, so a flood of distinct forged
// tokens pushes out only other refusals).
const (
	proxyTokenRefusalCacheSize = 4096
	proxyTokenRefusalTTL       = 10 * time.Second
)

// errNoProxyTokenKeys: tokens in our format arrive before the keys to
// verify them (or after they were withdrawn); they are refused, not passed
// on to TokenReview.
var errNoProxyTokenKeys = errors.New("no proxy token keys to verify with")

// ProxyTokens verifies the proxy's own bearer tokens with the keys and the
// audience of this installation, which rotate, so they are swapped whole by
// Set. Successes are remembered (verifycache's model) by the token's
// SHA-256, never past the token's exp, for at most a minute, and only under
// the keys and audience they were verified with; refusals are remembered
// the same way for 10 seconds (proxyTokenRefusalTTL), apart from the
// successes. The zero value refuses every token of ours until Set.
type ProxyTokens struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu     sync.RWMutex
	state  proxyTokenState
	caches *proxyTokenCaches
	// verify is proxytoken.Verify; tests count its calls.
	verify func(*proxytoken.KeySet, proxytoken.Audience, string, time.Time) (user.Info, time.Time, error)
}

type proxyTokenCaches struct {
	accepted *verifycache.Cache[[sha256.Size]byte]
	refused  *verifycache.Refusals[[sha256.Size]byte]
}

type proxyTokenState struct {
	// verify is a copy of the key set's Verify map: the caller may reuse
	// its map, and the signing key does not matter here.
	verify     map[string]*ecdsa.PublicKey
	audience   proxytoken.Audience
	generation uint64
}

// Set replaces the keys tokens are verified with and the audience they must
// name. nil ks means no keys: tokens of ours are refused. A real change of
// the verify keys or the audience drops every remembered verification, so a
// retired key stops working at once, not a cache TTL later.
func (p *ProxyTokens) Set(ks *proxytoken.KeySet, a proxytoken.Audience) {
	var verify map[string]*ecdsa.PublicKey
	if ks != nil && len(ks.Verify) > 0 {
		verify = maps.Clone(ks.Verify)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state.audience == a && sameVerifyKeys(p.state.verify, verify) {
		return
	}
	p.state = proxyTokenState{verify: verify, audience: a, generation: p.state.generation + 1}
}

func sameVerifyKeys(a, b map[string]*ecdsa.PublicKey) bool {
	return maps.EqualFunc(a, b, func(x, y *ecdsa.PublicKey) bool {
		return x == y || (x != nil && y != nil && x.Equal(y))
	})
}

func (p *ProxyTokens) current() (proxyTokenState, *proxyTokenCaches) {
	p.mu.RLock()
	st, c := p.state, p.caches
	p.mu.RUnlock()
	if c != nil {
		return st, c
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.caches == nil {
		p.caches = &proxyTokenCaches{
			accepted: verifycache.New[[sha256.Size]byte](proxyTokenCacheSize, proxyTokenCacheTTL),
			refused:  verifycache.NewRefusals[[sha256.Size]byte](proxyTokenRefusalCacheSize, proxyTokenRefusalTTL),
		}
	}
	return p.state, p.caches
}

// AuthenticateProxyToken implements ProxyTokenAuthenticator.
func (p *ProxyTokens) AuthenticateProxyToken(tok string) (*authenticator.Response, bool, error) {
	st, caches := p.current()
	now := time.Now()
	if p.Now != nil {
		now = p.Now()
	}
	key := sha256.Sum256([]byte(tok))
	// Every request of a logged-in client comes this way: the cache is
	// asked before the shape check, which decodes JSON. Only a token that
	// was ours and verified is in it.
	if len(st.verify) > 0 {
		if resp, ok := caches.accepted.Get(key, st.generation, now); ok {
			return resp, true, nil
		}
	}
	if !proxytoken.Ours(tok) {
		return nil, false, nil
	}
	if len(st.verify) == 0 {
		// Not remembered: it costs nothing, and the Set that brings keys
		// must let the token in at once.
		return nil, true, errNoProxyTokenKeys
	}
	if err := caches.refused.Get(key, st.generation, now); err != nil {
		return nil, true, err
	}
	u, exp, err := p.check(st, tok, now)
	if err != nil {
		if !notYetValid(err) {
			caches.refused.Add(key, err, st.generation, now)
		}
		return nil, true, err
	}
	resp := &authenticator.Response{User: u}
	caches.accepted.Add(key, resp, st.generation, now, exp)
	return resp, true, nil
}

// check verifies tok under st: the one signature check that the caches
// save.
func (p *ProxyTokens) check(st proxyTokenState, tok string, now time.Time) (user.Info, time.Time, error) {
	verify := p.verify
	if verify == nil {
		verify = proxytoken.Verify
	}
	u, exp, err := verify(&proxytoken.KeySet{Verify: st.verify}, st.audience, tok, now)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("proxy token: %w", err)
	}
	if _, reserved := reservedExtra(u.GetExtra()); reserved {
		// Only the proxy records who asked for a nested impersonation.
		return nil, time.Time{}, errProxyTokenReservedExtra
	}
	return u, exp, nil
}

// notYetValid reports a refusal that the passing of time alone turns into
// an acceptance (a token used before its nbf, as on a replica whose clock
// is behind the signer's by more than the 30 s nbf allows): it is not
// remembered, so the token works the moment it is valid.
func notYetValid(err error) bool {
	return errors.Is(err, jwt.ErrNotValidYet) || errors.Is(err, jwt.ErrIssuedInTheFuture)
}

// errProxyTokenReservedExtra: a token carrying the extra in which the
// proxy records the real user of a nested impersonation.
var errProxyTokenReservedExtra = errors.New("proxy token carries an extra reserved for the impersonation proxy")

// errProxyTokenNotAlone: an Authorization header with a token of ours and
// more words after "Bearer", which other readers would split differently.
var errProxyTokenNotAlone = errors.New("a proxy token must be the only word after Bearer")

// proxyTokenRefusal names why a token of ours was refused, in words that
// carry nothing of the token or its user, for the proxy's log.
func proxyTokenRefusal(err error) string {
	switch {
	case err == nil:
		return "no user"
	case errors.Is(err, errNoProxyTokenKeys):
		return "no keys yet"
	case errors.Is(err, errProxyTokenNotAlone):
		return "not alone in the header"
	case errors.Is(err, errProxyTokenReservedExtra):
		return "an extra reserved for the proxy"
	case errors.Is(err, proxytoken.ErrTooLarge):
		return "too large"
	case errors.Is(err, jwt.ErrExpired):
		return "expired"
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return "not yet valid"
	case errors.Is(err, jwt.ErrInvalidAudience), errors.Is(err, jwt.ErrInvalidIssuer):
		return "another installation's audience"
	default:
		return "invalid (malformed, unknown key, bad signature or claims)"
	}
}

// proxyTokenInWebSocketProtocol reports whether any Sec-WebSocket-Protocol
// entry carries a token of ours, read as the API server reads it. The proxy
// does not take its tokens from there, and must not forward them: every
// header but the identity headers goes upstream as it came.
func proxyTokenInWebSocketProtocol(h http.Header) bool {
	for _, enc := range proxyheaders.WebSocketBearers(h) {
		raw, err := base64.RawURLEncoding.DecodeString(enc)
		if err == nil && proxytoken.Ours(strings.TrimSpace(string(raw))) {
			return true
		}
	}
	return false
}

// NewTokenAuthenticator accepts bearer tokens (e.g. ServiceAccount tokens)
// that the API server's TokenReview accepts, with a short cache.
func NewTokenAuthenticator(reviews authenticationv1client.AuthenticationV1Interface) authenticator.Request {
	return bearertoken.New(cache.New(&tokenReviewer{reviews: reviews.TokenReviews()}, false, TokenReviewCacheTTL, TokenReviewCacheTTL))
}

// tokenReviewer asks the API server about a bearer token.
type tokenReviewer struct {
	reviews authenticationv1client.TokenReviewInterface
}

func (r *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := r.reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return nil, false, nil
	}
	u := tr.Status.User
	extra := make(map[string][]string, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = v
	}
	return &authenticator.Response{
		Audiences: tr.Status.Audiences,
		User:      &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra},
	}, true, nil
}
