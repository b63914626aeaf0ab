package testbed

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ca is a certificate authority kept in memory while the bed's PKI is generated.
type ca struct {
	cert *x509.Certificate
	key  crypto.Signer
	// keyType is what the keys of the certificates it issues are.
	keyType KeyType
}

// KeyType is the kind of key a CA and its certificates have.
type KeyType string

// Key types of the bed's PKI.
const (
	// RSA2048 is kubeadm's default for every key it makes (CAs, serving
	// and client certificates, the ServiceAccount signing key). It makes
	// signing a client certificate about six times as costly as P-256,
	// which every exchange on the signing-key path pays.
	RSA2048 KeyType = "RSA-2048"
	// P256 is quicker to make and to sign with: the bed's own services
	// (Dex, the test Supervisor) and the managed profile use it.
	P256 KeyType = "ECDSA P-256"
)

// ClusterKeyType is the key type of the cluster's PKI on a profile: what
// kubeadm makes on the kubeadm profile.
func ClusterKeyType(profile string) KeyType {
	if profile == ProfileKubeadm {
		return RSA2048
	}
	return P256
}

func newKey(t KeyType) (crypto.Signer, error) {
	if t == RSA2048 {
		return rsa.GenerateKey(rand.Reader, 2048)
	}
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120)) }

func newCA(cn string, t KeyType) (*ca, error) {
	key, err := newKey(t)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key, keyType: t}, nil
}

// leaf describes a certificate to issue.
type leaf struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	server bool
	client bool
}

func (c *ca) issue(l leaf) (certOut, keyOut []byte, err error) {
	key, err := newKey(c.keyType)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: l.cn, Organization: l.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     l.dns,
		IPAddresses:  l.ips,
	}
	if l.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	if err != nil {
		return nil, nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kp, nil
}

func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func (c *ca) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})
}

// writePair writes <name>.crt (0644) and <name>.key (0600) into dir.
func writePair(dir, name string, certPEM, keyPEM []byte) error {
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), certPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), keyPEM, 0o600)
}

func (c *ca) write(dir, name string) error {
	kp, err := keyPEM(c.key)
	if err != nil {
		return err
	}
	return writePair(dir, name, c.certPEM(), kp)
}

// makePKI writes every certificate and key the bed needs:
//
//	ca            cluster CA: apiserver clients, kubelet, cluster signing key for kcm
//	front-proxy-ca  requestheader CA of the aggregation layer
//	testbed-ca    CA for services of the bed itself (Dex)
//	sa            service account token signing key
func makePKI(cfg Config) error {
	dir := cfg.PKIDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	clusterKeys := ClusterKeyType(cfg.Profile)
	clusterCA, err := newCA("pinniped-e2e-"+cfg.Name+" cluster CA", clusterKeys)
	if err != nil {
		return err
	}
	frontCA, err := newCA("pinniped-e2e-"+cfg.Name+" front-proxy CA", clusterKeys)
	if err != nil {
		return err
	}
	bedCA, err := newCA("pinniped-e2e-"+cfg.Name+" test bed CA", P256)
	if err != nil {
		return err
	}
	for name, c := range map[string]*ca{"ca": clusterCA, "front-proxy-ca": frontCA, "testbed-ca": bedCA} {
		if err := c.write(dir, name); err != nil {
			return err
		}
	}

	nodeIP := net.ParseIP(cfg.NodeIP)
	firstSvcIP, err := firstServiceIP(cfg.ServiceCIDR)
	if err != nil {
		return err
	}
	type issue struct {
		ca   *ca
		name string
		l    leaf
	}
	issues := []issue{
		{clusterCA, "apiserver", leaf{cn: "kube-apiserver", server: true,
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
			ips: []net.IP{nodeIP, firstSvcIP, net.ParseIP("127.0.0.1")}}},
		// kube-apiserver's client certificate for kubelets: system:masters keeps the bed's
		// RBAC minimal (kubeadm binds the same power through system:kubelet-api-admin).
		{clusterCA, "apiserver-kubelet-client", leaf{cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true}},
		{clusterCA, "admin", leaf{cn: "kubernetes-admin", orgs: []string{"system:masters"}, client: true}},
		{clusterCA, "controller-manager", leaf{cn: "system:kube-controller-manager", client: true}},
		{clusterCA, "scheduler", leaf{cn: "system:kube-scheduler", client: true}},
		{clusterCA, "kube-proxy", leaf{cn: "system:kube-proxy", client: true}},
		{clusterCA, "kubelet", leaf{cn: "system:node:" + cfg.NodeName(), orgs: []string{"system:nodes"}, client: true}},
		{clusterCA, "kubelet-server", leaf{cn: cfg.NodeName(), dns: []string{cfg.NodeName()}, ips: []net.IP{nodeIP}, server: true}},
		{frontCA, "front-proxy-client", leaf{cn: "front-proxy-client", client: true}},
		{bedCA, "dex", leaf{cn: "dex", ips: []net.IP{nodeIP}, dns: []string{"dex", "localhost"}, server: true}},
		{bedCA, "supervisor", leaf{cn: "supervisor", ips: []net.IP{nodeIP}, dns: []string{"supervisor"}, server: true}},
		{bedCA, "oidcop", leaf{cn: "oidcop", ips: []net.IP{nodeIP}, dns: []string{"oidcop"}, server: true}},
	}
	for _, is := range issues {
		cp, kp, err := is.ca.issue(is.l)
		if err != nil {
			return fmt.Errorf("issue %s certificate: %w", is.name, err)
		}
		if err := writePair(dir, is.name, cp, kp); err != nil {
			return err
		}
	}

	sa, err := newKey(clusterKeys)
	if err != nil {
		return err
	}
	saKey, err := keyPEM(sa)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), saKey, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}

// firstServiceIP is the ClusterIP of the "kubernetes" Service: the first address of the range.
func firstServiceIP(cidr string) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("service CIDR %q: %w", cidr, err)
	}
	ip := n.IP.To4()
	if ip == nil {
		return nil, fmt.Errorf("service CIDR %q: only IPv4 is supported", cidr)
	}
	out := make(net.IP, 4)
	copy(out, ip)
	out[3]++
	return out, nil
}

// NewServingCert makes a fresh CA and a serving certificate for the given DNS names, e.g. a
// Service's "<name>.<namespace>.svc", for tests that run their own TLS servers in the bed.
func NewServingCert(dnsNames ...string) (caPEM, certPEM, keyPEM []byte, err error) {
	c, err := newCA("pinniped e2e serving CA", P256)
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM, keyPEM, err = c.issue(leaf{cn: dnsNames[0], dns: dnsNames, server: true})
	if err != nil {
		return nil, nil, nil, err
	}
	return c.certPEM(), certPEM, keyPEM, nil
}
