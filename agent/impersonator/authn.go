package impersonator

import (
	"context"
	"crypto/x509"
	"fmt"
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
)

// ClientCAs is the set of CAs whose client certificates the proxy accepts:
// the agent's own signer (certificates issued by TokenCredentialRequest on
// the proxy) and the cluster's client CA. Both rotate, so the pool is swapped
// whole and read per handshake.
type ClientCAs struct {
	mu   sync.RWMutex
	pool *x509.CertPool
}

// Set replaces the trusted CAs.
func (c *ClientCAs) Set(pemBundles ...[]byte) {
	pool := x509.NewCertPool()
	for _, b := range pemBundles {
		pool.AppendCertsFromPEM(b)
	}
	c.mu.Lock()
	c.pool = pool
	c.mu.Unlock()
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
// groups) signed by one of cas; k8s.io/apiserver's own x509 authenticator.
func NewCertAuthenticator(cas *ClientCAs) authenticator.Request {
	return x509request.NewDynamic(cas.VerifyOptions, x509request.CommonNameUserConversion)
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
