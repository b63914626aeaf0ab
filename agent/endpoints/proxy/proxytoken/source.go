package proxytoken

import (
	"context"
	"errors"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
)

// Source issues the impersonation proxy's own bearer tokens instead of
// client certificates. client-go closes every connection of a transport when
// an exec plugin hands it a new client certificate, so each renewal cut every
// watch and exec stream of a long-lived client; a new token only changes the
// Authorization header of the next request. A token carries the user's
// extras too, which a certificate cannot.
type Source struct {
	// Key is the signing key now and the audience it signs for; false
	// means there is none yet (the leader has not published one).
	Key func() (*Key, Audience, bool)
	// TTL is each token's lifetime; zero means clustercred.DefaultTTL, as for its CA source.
	TTL time.Duration
	// Fallback issues when no token can be: the proxy's CA source. Until
	// the key exists a certificate still lets the user in; and a token over
	// MaxSize (hundreds of groups) would be refused by the proxy
	// and by load balancers that cap header sizes, while a certificate of
	// the same groups travels in the TLS handshake instead.
	Fallback clustercred.Source
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Issue implements clustercred.Source. A user with extras is refused rather than
// falling back, as the fallback's certificate would drop them: the Fallback
// refuses them itself (ExtraError).
func (s *Source) Issue(ctx context.Context, u user.Info) (*clustercred.Credential, error) {
	key, aud, ok := s.Key()
	if !ok {
		return s.fallback(ctx, u)
	}
	if err := CheckUser(u); err != nil {
		// The proxy would refuse the token on every request: say so now.
		return nil, err
	}
	ttl := s.TTL
	if ttl == 0 {
		ttl = clustercred.DefaultTTL
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	token, exp, jti, err := Sign(key, aud, u, ttl, now())
	switch {
	case errors.Is(err, ErrTooLarge):
		return s.fallback(ctx, u)
	case err != nil:
		return nil, err
	}
	return &clustercred.Credential{
		ClusterCredential: &loginv1alpha1.ClusterCredential{Token: token, ExpirationTimestamp: metav1.NewTime(exp.UTC())},
		CredentialID:      "JTI=" + jti,
	}, nil
}

func (s *Source) fallback(ctx context.Context, u user.Info) (*clustercred.Credential, error) {
	if s.Fallback == nil {
		return nil, clustercred.ErrNoStrategy
	}
	return s.Fallback.Issue(ctx, u)
}
