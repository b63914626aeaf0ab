package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	_, err := parseFlags([]string{"--listen", "127.0.0.1:1", "--issuer=https://127.0.0.1:1"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--tls-cert") || !strings.Contains(err.Error(), "--upstream-password-client-id") || strings.Contains(err.Error(), "--listen") {
		t.Errorf("missing flags: %v", err)
	}
	args := []string{"--listen", "a", "--issuer", "b", "--tls-cert", "c", "--tls-key", "d", "--upstream-issuer", "e", "--upstream-ca", "f",
		"--upstream-client-id", "g", "--upstream-client-secret-file", "h", "--upstream-password-client-id", "i"}
	o, err := parseFlags(args, &bytes.Buffer{})
	if err != nil || o.idTokenLifetime != 2*time.Minute || o.accessTokenLifetime != 2*time.Minute || o.refreshTTL != 9*time.Hour {
		t.Errorf("defaults: %+v %v", o, err)
	}
	if o, err := parseFlags(append(args, "--id-token-lifetime", "5m"), &bytes.Buffer{}); err != nil || o.idTokenLifetime != 5*time.Minute {
		t.Errorf("--id-token-lifetime: %+v %v", o, err)
	}
	if _, err := parseFlags(append(args, "--refresh-token-lifetime", "0s"), &bytes.Buffer{}); err == nil {
		t.Error("a zero lifetime is accepted")
	}
	if _, err := New(Config{Issuer: "http://127.0.0.1:1"}); err == nil {
		t.Error("an http issuer is accepted")
	}
}

// TestRun starts the command as the bed does, serves discovery over TLS 1.2+, and stops
// cleanly when its context ends (SIGTERM in main).
func TestRun(t *testing.T) {
	up := newFakeUpstream(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certPEM, keyPEM := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	args := []string{
		"--listen", addr, "--issuer", "https://" + addr,
		"--tls-cert", write("tls.crt", certPEM), "--tls-key", write("tls.key", keyPEM),
		"--upstream-issuer", up.srv.URL,
		"--upstream-ca", write("ca.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.srv.Certificate().Raw})),
		"--upstream-client-id", upstreamClient, "--upstream-client-secret-file", write("secret", []byte(upstreamSecret+"\n")),
		"--upstream-password-client-id", passwordClient,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, logs) }()

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get("https://" + addr + "/.well-known/openid-configuration")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("discovery: HTTP %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving: %v\n%s", err, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	old := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get("https://" + addr + "/jwks.json"); err == nil {
		_ = resp.Body.Close()
		t.Error("TLS 1.1 is accepted")
	}

	// A cli_password login through the command's own upstream client (it trusts --upstream-ca).
	b := &testBed{t: t, issuer: "https://" + addr, client: client, logs: logs}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	b.passwordLogin("Bed LDAP", defaultScopes)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop")
	}
	if !strings.Contains(logs.String(), "GET /.well-known/openid-configuration 200") {
		t.Errorf("no request log:\n%s", logs)
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "supervisor"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
