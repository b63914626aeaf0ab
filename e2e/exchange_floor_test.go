//go:build e2e

package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// The crypto floor of one exchange: the work no implementation can skip,
// measured in this process with the same libraries, so the agent's CPU
// per exchange has a bound to be compared with in the same run. It is
// written here from the standard library and go-oidc alone, not from the
// agent's code, so that overhead in the agent cannot hide in it.

// floorRounds is how many times each step of the floor runs.
const floorRounds = 500

// floorRow is the floor with one CA: CPU time of this process per
// exchange for each step (garbage collection included, as it is in a
// pod's figure).
type floorRow struct {
	ca                          string
	verify, keygen, sign, total time.Duration
}

// exchangeFloor measures n rounds of each step: verifying token's
// signature and claims with Dex's published key (go-oidc, keys cached as
// the agent caches them), generating the client's ECDSA P-256 key, and
// issuing its certificate (signature, DER, PKCS#8 and PEM of the key) with
// the bed's cluster CA, as kubeadm makes it, and with a P-256 CA made here.
func exchangeFloor(t *testing.T, token string, n int) []floorRow {
	t.Helper()
	ctx := DexContext(t, context.Background())
	p, err := oidc.NewProvider(ctx, Bed.Config().DexIssuer())
	if err != nil {
		t.Fatalf("Dex discovery: %v", err)
	}
	verifier := p.Verifier(&oidc.Config{ClientID: testbed.DexClientID})
	if _, err := verifier.Verify(ctx, token); err != nil { // fetches the keys once
		t.Fatalf("verify the Dex token: %v", err)
	}
	verify := cpuPer(t, n, func() error { _, err := verifier.Verify(ctx, token); return err })
	keygen := cpuPer(t, n, func() error { _, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader); return err })

	pki := Bed.Config().PKIDir()
	bed, err := tls.LoadX509KeyPair(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		t.Fatalf("the bed's cluster CA: %v", err)
	}
	bedCert, err := x509.ParseCertificate(bed.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	p256Key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "floor P-256 CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, p256Key.Public(), p256Key)
	if err != nil {
		t.Fatal(err)
	}
	p256Cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	var rows []floorRow
	for _, ca := range []struct {
		label  string
		cert   *x509.Certificate
		signer crypto.Signer
	}{{"the bed's cluster CA", bedCert, bed.PrivateKey.(crypto.Signer)}, {"a CA made here", p256Cert, p256Key}} {
		client, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		sign := cpuPer(t, n, func() error { return issueFloorCert(ca.cert, ca.signer, client) })
		rows = append(rows, floorRow{ca: ca.label + " (" + keyName(ca.cert) + ")", verify: verify, keygen: keygen, sign: sign, total: verify + keygen + sign})
	}
	return rows
}

// issueFloorCert is the certificate an exchange issues: a client
// certificate for a user with groups, valid five minutes, and its key's
// PKCS#8 PEM.
func issueFloorCert(ca *x509.Certificate, signer crypto.Signer, key *ecdsa.PrivateKey) error {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "alice@example.com", Organization: []string{"developers", "everyone"}},
		NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(5 * time.Minute), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), signer)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	_ = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	_ = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return nil
}

// cpuPer is this process's CPU time (user and system) per call of f over
// n calls.
func cpuPer(t *testing.T, n int, f func() error) time.Duration {
	t.Helper()
	before := processCPU(t)
	for range n {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	return (processCPU(t) - before) / time.Duration(n)
}

func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// floorTable prints the floor rows as a Markdown table.
func floorTable(rows []floorRow) string {
	us := func(d time.Duration) string { return fmt.Sprintf("%d", d.Microseconds()) }
	s := "| the crypto floor, signing CA | token verify µs | P-256 key generation µs | certificate issue µs | total µs/exchange |\n|---|---|---|---|---|\n"
	for _, r := range rows {
		s += fmt.Sprintf("| %s | %s | %s | %s | %s |\n", r.ca, us(r.verify), us(r.keygen), us(r.sign), us(r.total))
	}
	return s
}
