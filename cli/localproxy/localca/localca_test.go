package localca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
)

func stateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proxy")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMadeOnceThenReused(t *testing.T) {
	dir := stateDir(t)
	first, err := Serve(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		for _, name := range []string{CertFile, KeyFile} {
			info, err := os.Lstat(filepath.Join(dir, name))
			if err != nil || info.Mode().Perm() != 0o600 {
				t.Errorf("%s: %v %v, want 0600", name, info.Mode(), err)
			}
		}
	}
	second, err := Serve(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.CAPEM, second.CAPEM) {
		t.Error("a second start made a new CA: kubeconfigs written before would stop trusting the proxy")
	}
	if bytes.Equal(first.Certificate.Certificate[0], second.Certificate.Certificate[0]) {
		t.Error("a second start reused the serving certificate")
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil || !bytes.Equal(onDisk, first.CAPEM) {
		t.Errorf("%s does not hold the CA returned: %v", CertFile, err)
	}
}

// TestServingCertificate: the leaf is for the loopback names only, for 30
// days, and a client that pins the CA (as the kubeconfig does) completes a
// handshake with each name.
func TestServingCertificate(t *testing.T) {
	dir := stateDir(t)
	now := time.Now()
	s, err := Serve(dir, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(s.Certificate.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	if strings.Join(leaf.DNSNames, ",") != "localhost" || strings.Join(ips, ",") != "127.0.0.1,::1" {
		t.Errorf("SANs %v %v", leaf.DNSNames, ips)
	}
	if bytes.Equal(leaf.RawSubject, leaf.RawIssuer) {
		t.Errorf("the serving certificate's subject is its issuer's (%s): OpenSSL clients take it for self-signed and refuse it", leaf.Subject)
	}
	if leaf.IsCA || !leaf.NotAfter.Equal(now.Add(ServingLifetime).Truncate(time.Second)) || !s.NotAfter.Truncate(time.Second).Equal(leaf.NotAfter) {
		t.Errorf("leaf CA %v until %v (returned %v), want %v", leaf.IsCA, leaf.NotAfter, s.NotAfter, now.Add(ServingLifetime))
	}

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{s.Certificate}, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM)
	for _, host := range []string{"localhost", "127.0.0.1", "example.com"} {
		conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", port), &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12})
		if err == nil {
			_ = conn.Close()
		}
		if (err == nil) != (host != "example.com") {
			t.Errorf("handshake as %s: %v", host, err)
		}
	}
}

// TestANearlyExpiredCAIsReplaced: a CA that would not outlive a new
// serving certificate is made again, not left to cap it.
func TestANearlyExpiredCAIsReplaced(t *testing.T) {
	dir := stateDir(t)
	then := time.Now().Add(-CALifetime + 10*24*time.Hour)
	old, err := Serve(dir, func() time.Time { return then })
	if err != nil {
		t.Fatal(err)
	}
	s, err := Serve(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(old.CAPEM, s.CAPEM) {
		t.Error("a CA with 10 days left was kept")
	}
}

func TestCorruptFilesAreNamed(t *testing.T) {
	dir := stateDir(t)
	if _, err := Serve(dir, nil); err != nil {
		t.Fatal(err)
	}
	good := map[string][]byte{}
	for _, name := range []string{CertFile, KeyFile} {
		good[name], _ = os.ReadFile(filepath.Join(dir, name))
	}
	other := stateDir(t)
	if _, err := Serve(other, nil); err != nil {
		t.Fatal(err)
	}
	otherKey, _ := os.ReadFile(filepath.Join(other, KeyFile))
	for name, c := range map[string]struct {
		file    string
		content []byte
		blamed  string
	}{
		"garbage cert":   {CertFile, []byte("not pem"), CertFile + " in"},
		"garbage key":    {KeyFile, []byte("not pem"), KeyFile + " in"},
		"truncated cert": {CertFile, good[CertFile][:len(good[CertFile])/2], CertFile + " in"},
		"another CA key": {KeyFile, otherKey, CertFile + " and " + KeyFile},
		"a key for cert": {CertFile, otherKey, CertFile + " in"},
		"a cert for key": {KeyFile, good[CertFile], KeyFile + " in"},
	} {
		t.Run(name, func(t *testing.T) {
			for f, b := range good {
				if err := privatedir.WriteFile(dir, f, b); err != nil {
					t.Fatal(err)
				}
			}
			if err := privatedir.WriteFile(dir, c.file, c.content); err != nil {
				t.Fatal(err)
			}
			_, err := Serve(dir, nil)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.blamed) || !strings.Contains(err.Error(), "delete "+filepath.Join(dir, CertFile)) {
				t.Errorf("%v, want a corrupt-CA error naming %q and saying to delete the files", err, c.blamed)
			}
			after, _ := os.ReadFile(filepath.Join(dir, c.file))
			if !bytes.Equal(after, c.content) {
				t.Error("the corrupt file was overwritten: the person is told what to delete, nothing is replaced behind their back")
			}
		})
	}
}

// TestOnlyOneFileMakesANewCA: a start that stopped between writing the
// key and the certificate left no CA; the next one makes it.
func TestOnlyOneFileMakesANewCA(t *testing.T) {
	dir := stateDir(t)
	first, err := Serve(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, CertFile)); err != nil {
		t.Fatal(err)
	}
	s, err := Serve(dir, nil)
	if err != nil || bytes.Equal(s.CAPEM, first.CAPEM) {
		t.Fatalf("%v", err)
	}
}

func TestLinksAndOpenDirectoriesAreRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("modes and links are Unix's here")
	}
	dir := stateDir(t)
	if _, err := Serve(dir, nil); err != nil {
		t.Fatal(err)
	}
	// A link to another CA, planted in place of the key.
	other := stateDir(t)
	if _, err := Serve(other, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, KeyFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, KeyFile), filepath.Join(dir, KeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(dir, nil); !errors.Is(err, privatedir.ErrNotPrivate) || !strings.Contains(err.Error(), KeyFile) {
		t.Errorf("a link for the key: %v", err)
	}
	// A state directory others may enter.
	open := stateDir(t)
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(open, nil); !errors.Is(err, privatedir.ErrNotPrivate) {
		t.Errorf("a directory others may enter: %v", err)
	}
	// The directory itself a link.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(link, nil); !errors.Is(err, privatedir.ErrNotPrivate) {
		t.Errorf("a link for the directory: %v", err)
	}
}

// TestARunningProxyGetsANewCertificate: a proxy that runs longer than its
// serving certificate lives serves a new one from the same CA (the one its
// kubeconfig pins) before the old one expires.
func TestARunningProxyGetsANewCertificate(t *testing.T) {
	s, err := Serve(stateDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	at := s.NotAfter.Add(-ReissueBefore - time.Hour)
	get := s.GetCertificate(func() time.Time { return at })
	first, _ := get(nil)
	if again, _ := get(nil); again != first || !bytes.Equal(first.Certificate[0], s.Certificate.Certificate[0]) {
		t.Fatal("a certificate with more than a week left was replaced")
	}
	at = s.NotAfter.Add(-ReissueBefore + time.Hour)
	fresh, _ := get(nil)
	if bytes.Equal(fresh.Certificate[0], first.Certificate[0]) {
		t.Fatal("a certificate within a week of its expiry was not replaced")
	}
	leaf, err := x509.ParseCertificate(fresh.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"}); err != nil {
		t.Fatalf("the new certificate does not chain to the CA the kubeconfig pins: %v", err)
	}
}

// TestNoKeyStormNearTheCAsEnd: once the CA ends within a week, what it
// issues ends no later than the current certificate; the proxy keeps the
// one it has and does not make a key at every handshake.
func TestNoKeyStormNearTheCAsEnd(t *testing.T) {
	ca, err := certauthority.New("test CA", 3*24*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, end, err := issue(ca)
	if err != nil {
		t.Fatal(err)
	}
	s := &Serving{Certificate: *cert, NotAfter: end, ca: ca}
	at := time.Now()
	get := s.GetCertificate(func() time.Time { return at })
	first, _ := get(nil)
	for range 3 {
		if again, _ := get(nil); again != first {
			t.Fatal("a certificate the CA cannot outlive was replaced by one that lives no longer")
		}
	}
	if !s.tried.Equal(at) {
		t.Fatalf("tried at %v, want %v", s.tried, at)
	}
	at = at.Add(30 * time.Minute)
	_, _ = get(nil)
	if s.tried.Equal(at) {
		t.Fatal("a new certificate was tried again within the hour")
	}
}

// TestTheCAIsNameConstrainedToLoopback: the CA carries a critical name
// constraint to localhost, 127.0.0.1 and ::1, so that a certificate its key
// signs for any other name fails verification in a client that trusts it,
// as the kubeconfig's does: the key in the state directory, leaked, can
// impersonate the proxy and nothing else.
func TestTheCAIsNameConstrainedToLoopback(t *testing.T) {
	s, err := Serve(stateDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	caCert := s.ca.Certificate()
	var ranges []string
	for _, r := range caCert.PermittedIPRanges {
		ranges = append(ranges, r.String())
	}
	if !caCert.PermittedDNSDomainsCritical || strings.Join(caCert.PermittedDNSDomains, ",") != "localhost" ||
		strings.Join(ranges, ",") != "127.0.0.1/32,::1/128" {
		t.Fatalf("CA constraints: critical %v, DNS %v, IP %v; want critical, localhost, 127.0.0.1/32 and ::1/128",
			caCert.PermittedDNSDomainsCritical, caCert.PermittedDNSDomains, ranges)
	}
	critical := false
	for _, ext := range caCert.Extensions {
		if ext.Id.Equal([]int{2, 5, 29, 30}) { // id-ce-nameConstraints
			critical = ext.Critical
		}
	}
	if !critical {
		t.Fatal("the name constraints extension is missing or not critical: a verifier that ignores it would accept any name")
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM)
	verify := func(dns []string, ips []net.IP, host string) error {
		t.Helper()
		issued, err := s.ca.IssueServingCert("test", dns, ips, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
		return err
	}
	// The serving certificate's names, each checked as the host too.
	for _, c := range []struct {
		dns  []string
		ips  []net.IP
		host string
	}{
		{dns: DNSNames, ips: IPs, host: "localhost"},
		{dns: DNSNames, ips: IPs, host: "127.0.0.1"},
		{dns: DNSNames, ips: IPs, host: "::1"},
		{dns: []string{"localhost"}},
		{ips: []net.IP{net.IPv4(127, 0, 0, 1)}},
		{ips: []net.IP{net.IPv6loopback}},
	} {
		if err := verify(c.dns, c.ips, c.host); err != nil {
			t.Errorf("a leaf for %v %v (host %q) does not verify: %v", c.dns, c.ips, c.host, err)
		}
	}
	// A leaf for any other name is refused by the chain itself, checked as
	// a client that connects to that name does, and with no host at all;
	// so is a leaf that adds another name to the loopback ones.
	for _, c := range []struct {
		dns  []string
		ips  []net.IP
		host string
	}{
		{dns: []string{"example.com"}, host: "example.com"},
		{dns: []string{"localhost.example.com"}, host: "localhost.example.com"},
		{dns: []string{"kubernetes.default.svc"}, host: "kubernetes.default.svc"},
		{ips: []net.IP{net.IPv4(10, 0, 0, 1)}, host: "10.0.0.1"},
		{ips: []net.IP{net.IPv4(127, 0, 0, 2)}, host: "127.0.0.2"},
		{ips: []net.IP{net.ParseIP("2001:db8::1")}, host: "2001:db8::1"},
		{dns: []string{"localhost", "example.com"}, ips: IPs, host: "example.com"},
		{dns: DNSNames, ips: append([]net.IP{net.IPv4(10, 0, 0, 1)}, IPs...), host: "10.0.0.1"},
	} {
		for _, host := range []string{c.host, ""} {
			err := verify(c.dns, c.ips, host)
			var invalid x509.CertificateInvalidError
			if !errors.As(err, &invalid) || invalid.Reason != x509.CANotAuthorizedForThisName {
				t.Errorf("a leaf for %v %v (host %q): %v; want the CA not authorized for this name", c.dns, c.ips, host, err)
			}
		}
	}
}

// TestAnUnconstrainedCAIsReplaced: a CA made before the proxy constrained
// its CA (as certauthority.New makes one without options) is made again,
// constrained, not kept for the rest of its five years.
func TestAnUnconstrainedCAIsReplaced(t *testing.T) {
	dir := stateDir(t)
	old, err := certauthority.New(commonName, CALifetime, nil)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := old.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if err := privatedir.WriteFile(dir, KeyFile, keyPEM); err != nil {
		t.Fatal(err)
	}
	if err := privatedir.WriteFile(dir, CertFile, old.CertPEM()); err != nil {
		t.Fatal(err)
	}
	s, err := Serve(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(s.CAPEM, old.CertPEM()) || !isLoopbackOnly(s.ca.Certificate()) {
		t.Fatal("an unconstrained CA was kept")
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil || !bytes.Equal(onDisk, s.CAPEM) {
		t.Fatalf("%s does not hold the new CA: %v", CertFile, err)
	}
	again, err := Serve(dir, nil)
	if err != nil || !bytes.Equal(again.CAPEM, s.CAPEM) {
		t.Fatalf("the constrained CA was not reused: %v", err)
	}
}
