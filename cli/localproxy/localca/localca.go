// Package localca is the local credential proxy's own certificate
// authority: made once in the proxy's state directory, then reused, so the
// CA a generated kubeconfig pins stays the same across restarts. Each start
// issues a new serving certificate for the loopback addresses.
//
// Why TLS on loopback at all: the pinned CA keeps another local user who
// takes the port while the proxy is down from receiving the local secret,
// since client-go checks the server's certificate before it sends a header.
package localca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
)

// Files of the CA in the state directory, both 0600.
const (
	CertFile = "ca.crt"
	KeyFile  = "ca.key"
)

const (
	// CALifetime is how long a new CA is valid.
	CALifetime = 5 * 365 * 24 * time.Hour
	// ServingLifetime is how long each start's serving certificate is.
	ServingLifetime = 30 * 24 * time.Hour
	// commonName names the CA, for whoever looks.
	commonName = "pinniped proxy local CA"
	// servingName names the serving certificates. It must differ from the
	// CA's: OpenSSL (curl, Python, Node's clients: Lens, Headlamp) takes a
	// certificate whose subject is its issuer's for self-signed, and
	// refuses it.
	servingName = "pinniped proxy"
)

// Names the serving certificate is for: what a generated kubeconfig may
// name as the proxy's address. The CA is name-constrained to them
// (loopbackOnly).
var (
	DNSNames = []string{"localhost"}
	IPs      = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
)

// loopbackOnly is the CA's name constraint: DNSNames (with their
// subdomains, which RFC 6761 keeps on loopback too) and exactly the
// addresses in IPs. Why: the CA's key sits in a file of the state
// directory, and a client that trusts the CA (every kubeconfig the proxy
// wrote, and whatever a person added it to) would otherwise accept a
// certificate it signs for any server at all; constrained, a leaked key
// can only impersonate the loopback proxy itself.
func loopbackOnly() certauthority.Option {
	return certauthority.NameConstraints(DNSNames, hostRanges())
}

// hostRanges are IPs as one-address ranges, in the form crypto/x509 parses
// a constraint back into (4 bytes for IPv4), so they compare with a loaded
// CA's.
func hostRanges() []*net.IPNet {
	out := make([]*net.IPNet, 0, len(IPs))
	for _, ip := range IPs {
		if v4 := ip.To4(); v4 != nil {
			out = append(out, &net.IPNet{IP: v4, Mask: net.CIDRMask(32, 32)})
		} else {
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(128, 128)})
		}
	}
	return out
}

// isLoopbackOnly reports whether a CA certificate carries exactly the
// constraint loopbackOnly makes. A CA made before the proxy constrained
// its CA does not, and is made again (Serve).
func isLoopbackOnly(c *x509.Certificate) bool {
	want := hostRanges()
	return c.PermittedDNSDomainsCritical &&
		slices.Equal(c.PermittedDNSDomains, DNSNames) &&
		len(c.ExcludedDNSDomains) == 0 && len(c.ExcludedIPRanges) == 0 &&
		slices.EqualFunc(c.PermittedIPRanges, want, func(a, b *net.IPNet) bool {
			return a.IP.Equal(b.IP) && bytes.Equal(a.Mask, b.Mask)
		})
}

// ErrCorrupt is in the error for a CA file that cannot be used.
var ErrCorrupt = errors.New("the proxy's local CA is unusable")

// Serving is one start's TLS identity.
type Serving struct {
	// Certificate is the serving certificate and its key, for tls.Config.
	Certificate tls.Certificate
	// CAPEM is the CA certificate, for the kubeconfig's
	// certificate-authority-data.
	CAPEM []byte
	// NotAfter is when the serving certificate expires.
	NotAfter time.Time

	ca  *certauthority.CA
	mu  sync.Mutex
	cur *tls.Certificate
	end time.Time
	// tried is when a new certificate was last issued: near the CA's own
	// expiry a new one ends no later than the current one, and without a
	// pause every handshake would make a key.
	tried time.Time
}

// ReissueBefore is how long before its expiry a running proxy's serving
// certificate is replaced.
const ReissueBefore = 7 * 24 * time.Hour

// GetCertificate is for tls.Config: it serves the certificate and issues a
// new one from the same CA once the current one is within ReissueBefore of
// its expiry. A proxy may run longer than a serving certificate lives, and
// the kubeconfig it wrote pins the CA, not the certificate. If issuing
// fails, the current certificate is served until it expires.
func (s *Serving) GetCertificate(now func() time.Time) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if now == nil {
		now = time.Now
	}
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cur == nil {
			s.cur, s.end = &s.Certificate, s.NotAfter
		}
		if t := now(); s.ca != nil && !t.Before(s.end.Add(-ReissueBefore)) && !t.Before(s.tried.Add(time.Hour)) {
			s.tried = t
			// Only a certificate that lives longer replaces the current
			// one: the CA bounds what it issues, and once it is near its
			// end only a restart (which makes a new CA) helps.
			if cert, end, err := issue(s.ca); err == nil && end.After(s.end) {
				s.cur, s.end = cert, end
			}
		}
		return s.cur, nil
	}
}

func issue(ca *certauthority.CA) (*tls.Certificate, time.Time, error) {
	issued, err := ca.IssueServingCert(servingName, DNSNames, IPs, ServingLifetime)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("issue the proxy's serving certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("the proxy's serving certificate: %w", err)
	}
	return &cert, issued.NotAfter, nil
}

// Serve loads the CA from dir, or makes one there when it has none (or one
// that will expire before a new serving certificate would, or one not
// name-constrained to the loopback names, as CAs made by earlier versions
// are not), and issues a serving certificate for localhost, 127.0.0.1 and
// ::1. dir must be the proxy's state directory, made private
// (state.Prepare); the CA files are read and written under privatedir's
// rule.
func Serve(dir string, now func() time.Time) (*Serving, error) {
	if now == nil {
		now = time.Now
	}
	ca, err := load(dir, now)
	if err != nil {
		return nil, err
	}
	// An unconstrained CA is replaced rather than kept: kept, its key would
	// vouch for any name for up to five more years. This start writes its
	// kubeconfig with the new CA; a copy of an older one elsewhere stops
	// trusting the proxy once, as after the CA's expiry.
	if ca == nil || ca.Certificate().NotAfter.Before(now().Add(ServingLifetime)) || !isLoopbackOnly(ca.Certificate()) {
		if ca, err = create(dir, now); err != nil {
			return nil, err
		}
	}
	cert, notAfter, err := issue(ca)
	if err != nil {
		return nil, err
	}
	return &Serving{Certificate: *cert, CAPEM: ca.CertPEM(), NotAfter: notAfter, ca: ca}, nil
}

// load reads the CA, or returns nil when dir has neither file: a start
// that made only one of them before it stopped left nothing usable either,
// and the CA is made again.
func load(dir string, now func() time.Time) (*certauthority.CA, error) {
	certPEM, certErr := privatedir.ReadFile(dir, CertFile)
	keyPEM, keyErr := privatedir.ReadFile(dir, KeyFile)
	switch {
	case errors.Is(certErr, fs.ErrNotExist) || errors.Is(keyErr, fs.ErrNotExist):
		return nil, nil
	case certErr != nil:
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, CertFile), certErr)
	case keyErr != nil:
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, KeyFile), keyErr)
	}
	if b, _ := pem.Decode(certPEM); b == nil || b.Type != "CERTIFICATE" {
		return nil, corrupt(dir, CertFile, errors.New("it holds no PEM certificate"))
	} else if c, err := x509.ParseCertificate(b.Bytes); err != nil {
		return nil, corrupt(dir, CertFile, err)
	} else if !c.IsCA {
		return nil, corrupt(dir, CertFile, errors.New("its certificate is not a CA"))
	}
	if b, _ := pem.Decode(keyPEM); b == nil {
		return nil, corrupt(dir, KeyFile, errors.New("it holds no PEM key"))
	} else if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err != nil {
		return nil, corrupt(dir, KeyFile, err)
	}
	ca, err := certauthority.Load(certPEM, keyPEM, now)
	if err != nil {
		return nil, corrupt(dir, CertFile+" and "+KeyFile, err)
	}
	return ca, nil
}

// corrupt says which file is wrong and how to recover: a new CA means
// kubeconfigs written by earlier starts stop trusting the proxy, and the
// next start writes a new one anyway.
func corrupt(dir, what string, err error) error {
	return fmt.Errorf("%w: %s in %s cannot be read (%w): delete %s and %s there, and start `pinniped proxy` again to make a new one",
		ErrCorrupt, what, dir, err, filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
}

// create makes a new CA and writes it: the key first, so the certificate,
// whose presence alone would not make a CA, is never there without it.
func create(dir string, now func() time.Time) (*certauthority.CA, error) {
	ca, err := certauthority.New(commonName, CALifetime, now, loopbackOnly())
	if err != nil {
		return nil, fmt.Errorf("make the proxy's local CA: %w", err)
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	if err := privatedir.WriteFile(dir, KeyFile, keyPEM); err != nil {
		return nil, fmt.Errorf("write %s: %w", filepath.Join(dir, KeyFile), err)
	}
	if err := privatedir.WriteFile(dir, CertFile, ca.CertPEM()); err != nil {
		return nil, fmt.Errorf("write %s: %w", filepath.Join(dir, CertFile), err)
	}
	return ca, nil
}
