package impersonator

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/pinniped-kit/pinniped/agent/chaincheck"
	"github.com/pinniped-kit/pinniped/agent/proxy/verifycache"
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
