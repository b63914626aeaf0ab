// Package clustercred turns an authenticated user into a short-lived
// cluster credential: a Source of them. Which strategy can do that depends
// on the cluster (its signing key, its CSR API, or the agent's own CA or
// token keys for the impersonation proxy).
package clustercred

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/apis/credentialttl"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
)

// DefaultTTL is the lifetime of issued client certificates, as upstream.
const DefaultTTL = credentialttl.Default

// Source issues a credential for a user.
type Source interface {
	Issue(ctx context.Context, u user.Info) (*Credential, error)
}

// Credential is a credential and what the audit log may say about it.
type Credential struct {
	*loginv1alpha1.ClusterCredential
	// CredentialID is the credential-id extra the cluster sees on requests
	// made with this credential ("JTI=<jti>"), so the exchange's audit line
	// can be tied to the API server's without logging the credential.
	// Empty for certificates, which carry none.
	CredentialID string
}

// ErrNoStrategy means no strategy can issue credentials right now; the
// CredentialIssuer status says why.
var ErrNoStrategy = errors.New("no credential issuing strategy is ready")

// ExtraError is a Source's refusal of a user extra its credentials cannot
// carry. The Source decides, not the exchange, because only the one that
// actually issues knows: a certificate has no place for extras, a proxy
// token does, and the Switch may change sources between two exchanges.
type ExtraError struct {
	// Key is the extra's key; its values are never named.
	Key string
}

func (e *ExtraError) Error() string {
	return fmt.Sprintf("authenticator returned extra %q, which client certificates cannot carry", e.Key)
}

// certificateCarries refuses a user with extras, which a client certificate
// would silently drop: an authorizer or admission webhook that decides on
// them would then see someone other than whom the authenticator meant. The
// credential ID is the exception: it names the token the authenticator saw,
// and a certificate is a credential of its own.
func certificateCarries(u user.Info) error {
	for _, k := range slices.Sorted(maps.Keys(u.GetExtra())) {
		if k != user.CredentialIDKey {
			return &ExtraError{Key: k}
		}
	}
	return nil
}

// CA issues client certificates signed by an in-memory CA: the cluster
// signing key, or the agent's own CA for the impersonation proxy.
type CA struct {
	CA  *certauthority.CA
	TTL time.Duration
	// DropsUID, when set, says why the API server that reads these
	// certificates would not see a UID in them (CertUIDUnread). A user
	// with a UID is then refused, as the CSR API's signer refuses one,
	// rather than handed a certificate that names someone with less.
	DropsUID string
}

// Issue implements Source.
func (c *CA) Issue(_ context.Context, u user.Info) (*Credential, error) {
	if err := certificateCarries(u); err != nil {
		return nil, err
	}
	if c.DropsUID != "" && u.GetUID() != "" {
		return nil, fmt.Errorf("%s, and the authenticator maps one (claimMappings.uid): "+
			"remove it, upgrade the cluster, or log in through the impersonation proxy, whose certificates carry it", c.DropsUID)
	}
	ttl := c.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	issued, err := c.CA.IssueClientCert(u.GetName(), u.GetUID(), u.GetGroups(), ttl)
	if err != nil {
		return nil, err
	}
	return &Credential{ClusterCredential: &loginv1alpha1.ClusterCredential{
		ExpirationTimestamp:   metaTime(issued.NotAfter),
		ClientCertificateData: string(issued.CertPEM),
		ClientKeyData:         string(issued.KeyPEM),
	}}, nil
}

// Switch delegates to whichever Source the controllers last chose. Exchanges
// read it without locks; controllers replace it when strategies change.
type Switch struct {
	current atomic.Pointer[Source]
}

// Set makes i the active Source; nil means none is ready.
func (s *Switch) Set(i Source) {
	if i == nil {
		s.current.Store(nil)
		return
	}
	s.current.Store(&i)
}

// Issue implements Source. It reads the active Source once, so the one that
// issues is also the one that decided what the user's credential can carry.
func (s *Switch) Issue(ctx context.Context, u user.Info) (*Credential, error) {
	p := s.current.Load()
	if p == nil {
		return nil, ErrNoStrategy
	}
	return (*p).Issue(ctx, u)
}

// CertUIDUnread says why an API server of version v (or whose version could
// not be read: err) would not read a UID from a client certificate, or ""
// when it should. kube-apiserver reads the UID attribute of a certificate's
// subject from Kubernetes 1.33 (AllowParsingUserUIDFromCertAuth, beta and
// on by default); an older one ignores it, and the user would arrive
// without it. A server emulating an older version counts as that version.
// (An administrator can still turn the gate off, which no version shows.)
func CertUIDUnread(v *version.Info, err error) string {
	if err != nil {
		return fmt.Sprintf("the cluster's Kubernetes version could not be read (%v), so a certificate's UID may not reach it", err)
	}
	majorS, minorS := v.Major, v.Minor
	if v.EmulationMajor != "" || v.EmulationMinor != "" {
		majorS, minorS = v.EmulationMajor, v.EmulationMinor
	}
	major, errMajor := strconv.Atoi(strings.TrimSuffix(majorS, "+"))
	minor, errMinor := strconv.Atoi(strings.TrimSuffix(minorS, "+"))
	switch {
	case errMajor != nil || errMinor != nil:
		return fmt.Sprintf("the cluster's Kubernetes version %q.%q could not be read, so a certificate's UID may not reach it", majorS, minorS)
	case major == 1 && minor < 33:
		return fmt.Sprintf("Kubernetes %s (as %d.%d) reads no UID from client certificates (1.33 and later do)", v.GitVersion, major, minor)
	}
	return ""
}
