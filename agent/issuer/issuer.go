// Package issuer turns an authenticated user into a short-lived cluster
// credential. Which strategy can do that depends on the cluster (its signing
// key, its CSR API, or the agent's own CA for the impersonation proxy).
package issuer

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/apis/credentialttl"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/certauthority"
)

// DefaultTTL is the lifetime of issued client certificates, as upstream.
const DefaultTTL = credentialttl.Default

// Issuer issues a credential for a user.
type Issuer interface {
	Issue(ctx context.Context, u user.Info) (*loginv1alpha1.ClusterCredential, error)
}

// ErrNoStrategy means no strategy can issue credentials right now; the
// CredentialIssuer status says why.
var ErrNoStrategy = errors.New("no credential issuing strategy is ready")

// CA issues client certificates signed by an in-memory CA: the cluster
// signing key, or the agent's own CA for the impersonation proxy.
type CA struct {
	CA  *certauthority.CA
	TTL time.Duration
}

// Issue implements Issuer.
func (c *CA) Issue(_ context.Context, u user.Info) (*loginv1alpha1.ClusterCredential, error) {
	ttl := c.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	issued, err := c.CA.IssueClientCert(u.GetName(), u.GetUID(), u.GetGroups(), ttl)
	if err != nil {
		return nil, err
	}
	return &loginv1alpha1.ClusterCredential{
		ExpirationTimestamp:   metaTime(issued.NotAfter),
		ClientCertificateData: string(issued.CertPEM),
		ClientKeyData:         string(issued.KeyPEM),
	}, nil
}

// Switch delegates to whichever issuer the controllers last chose. Exchanges
// read it without locks; controllers replace it when strategies change.
type Switch struct {
	current atomic.Pointer[Issuer]
}

// Set makes i the active issuer; nil means none is ready.
func (s *Switch) Set(i Issuer) {
	if i == nil {
		s.current.Store(nil)
		return
	}
	s.current.Store(&i)
}

// Issue implements Issuer.
func (s *Switch) Issue(ctx context.Context, u user.Info) (*loginv1alpha1.ClusterCredential, error) {
	p := s.current.Load()
	if p == nil {
		return nil, ErrNoStrategy
	}
	return (*p).Issue(ctx, u)
}
