// Package certauthority issues short-lived client certificates and keeps the
// agent's own certificate authorities. It only composes crypto/x509; nothing
// here implements cryptography by hand.
package certauthority

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	asn1util "k8s.io/apimachinery/pkg/apis/asn1"
)

// Backdate is how far NotBefore is set in the past, so a certificate is
// accepted at once by an API server whose clock runs a little behind ours.
const Backdate = 5 * time.Minute

// CA is a certificate authority: a certificate and the key that signs with it.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	signer  crypto.Signer
	now     func() time.Time
}

// Load builds a CA from PEM data, e.g. the cluster signing key read from the
// controller manager's node. The key may be PKCS#1, PKCS#8 or SEC1.
func Load(certPEM, keyPEM []byte, now func() time.Time) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate and key do not form a valid pair: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("certificate is not a CA (basicConstraints CA:FALSE)")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA key of type %T cannot sign", pair.PrivateKey)
	}
	return &CA{cert: cert, certPEM: pemCert(pair.Certificate[0]), signer: signer, now: nowOrDefault(now)}, nil
}

// Option changes the CA certificate New makes.
type Option func(*x509.Certificate)

// NameConstraints limits the names that certificates under the CA may
// carry to the DNS domains given (each with its subdomains, as RFC 5280
// reads a dNSName constraint) and the IP ranges given. The extension is
// critical, so a verifier that cannot apply it refuses the chain rather
// than ignore it. Why: a CA that exists for a few names (a loopback
// server's) then cannot vouch for any other, even if its key leaks; Go's
// crypto/x509 and OpenSSL apply a trust anchor's constraints to the whole
// chain. Certificates the CA issues are not checked against them here: a
// verifier does that.
func NameConstraints(dnsDomains []string, ipRanges []*net.IPNet) Option {
	return func(c *x509.Certificate) {
		c.PermittedDNSDomainsCritical = true
		c.PermittedDNSDomains = slices.Clone(dnsDomains)
		c.PermittedIPRanges = slices.Clone(ipRanges)
	}
}

// New creates a self-signed ECDSA P-256 CA valid for lifetime.
func New(commonName string, lifetime time.Duration, now func() time.Time, opts ...Option) (*CA, error) {
	now = nowOrDefault(now)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             t.Add(-Backdate),
		NotAfter:              t.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, o := range opts {
		o(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, certPEM: pemCert(der), signer: key, now: now}, nil
}

// CertPEM is the CA certificate, for clients' trust bundles.
func (c *CA) CertPEM() []byte { return c.certPEM }

// Certificate is the parsed CA certificate.
func (c *CA) Certificate() *x509.Certificate { return c.cert }

// KeyPEM returns the CA's private key as PKCS#8 PEM, for persisting a
// generated CA in a Secret.
func (c *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(c.signer)
	if err != nil {
		return nil, fmt.Errorf("marshal CA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Issued is a freshly issued certificate with its new private key, both PEM.
type Issued struct {
	CertPEM  []byte
	KeyPEM   []byte
	NotAfter time.Time
}

// IssueClientCert issues a client certificate that Kubernetes maps to the
// user (ClientSubject). The key is a new ECDSA P-256 key generated here; it
// never leaves this process except in the result.
func (c *CA) IssueClientCert(username, uid string, groups []string, ttl time.Duration) (*Issued, error) {
	if username == "" {
		return nil, errors.New("refusing to issue a certificate with an empty username")
	}
	return c.issue(ClientSubject(username, uid, groups), ttl,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
}

// ClientSubject is the subject Kubernetes reads a user from: CN is the
// username, each O a group, and a non-empty uid goes in Kubernetes' UID
// attribute (1.3.6.1.4.1.57683.2), which kube-apiserver reads from 1.33 on
// (AllowParsingUserUIDFromCertAuth) and older ones ignore.
func ClientSubject(username, uid string, groups []string) pkix.Name {
	n := pkix.Name{CommonName: username, Organization: groups}
	if uid != "" {
		n.ExtraNames = []pkix.AttributeTypeAndValue{{Type: asn1util.X509UID(), Value: uid}}
	}
	return n
}

// IssueServingCert issues a TLS server certificate for the given DNS names and IPs.
func (c *CA) IssueServingCert(commonName string, dnsNames []string, ips []net.IP, ttl time.Duration) (*Issued, error) {
	return c.issue(pkix.Name{CommonName: commonName}, ttl,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, dnsNames, ips)
}

func (c *CA) issue(subject pkix.Name, ttl time.Duration, usage []x509.ExtKeyUsage, dnsNames []string, ips []net.IP) (*Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	t := c.now()
	notAfter := t.Add(ttl)
	if notAfter.After(c.cert.NotAfter) {
		// A certificate outliving its issuer would fail verification early
		// and confusingly; cap it instead.
		notAfter = c.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             t.Add(-Backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           usage,
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return &Issued{
		CertPEM:  pemCert(der),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		NotAfter: notAfter,
	}, nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return serial, nil
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func nowOrDefault(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
