// Package catest makes the TLS side of a test API server: a CA of its own
// that signs both the server's certificate and the clients' certificates
// the server trusts, as kube-apiserver's client CA does.
package catest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
)

// LoopbackServer returns a new CA and a server configuration that serves
// 127.0.0.1 with a certificate the CA signed and verifies a client
// certificate, when one is given, against the same CA.
func LoopbackServer(t testing.TB) (*certauthority.CA, *tls.Config) {
	t.Helper()
	ca, err := certauthority.New("test CA", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.IssueServingCert("api", nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	return ca, &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool, MinVersion: tls.VersionTLS12}
}
