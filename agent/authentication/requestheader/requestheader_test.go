package requestheader_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/pinniped-kit/pinniped/agent/authentication/requestheader"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
)

func configMap(caPEM []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: requestheader.ConfigMapNamespace, Name: requestheader.ConfigMapName},
		Data: map[string]string{
			"requestheader-client-ca-file":       string(caPEM),
			"requestheader-allowed-names":        `["front-proxy-client"]`,
			"requestheader-username-headers":     `["X-Remote-User"]`,
			"requestheader-group-headers":        `["X-Remote-Group"]`,
			"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		},
	}
}

func clientCert(t *testing.T, ca *certauthority.CA, cn string) tls.Certificate {
	t.Helper()
	issued, err := ca.IssueClientCert(cn, "", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func TestFrontProxyAuthentication(t *testing.T) {
	proxyCA, _ := certauthority.New("front-proxy-ca", time.Hour, nil)
	otherCA, _ := certauthority.New("other", time.Hour, nil)
	client := fake.NewClientset(configMap(proxyCA.CertPEM()))
	ctx := t.Context()
	src, err := requestheader.NewSource(ctx, client, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := request.UserFrom(r.Context())
		_, _ = io.WriteString(w, u.GetName()+"|"+r.Header.Get("X-Remote-User"))
	})
	srv := httptest.NewUnstartedServer(requestheader.Middleware(src.Authenticator, slog.New(slog.DiscardHandler), app))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	get := func(cert *tls.Certificate, user string) (int, string) {
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Remote-User", user)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	good := clientCert(t, proxyCA, "front-proxy-client")
	if code, body := get(&good, "alice"); code != 200 || body != "alice|" {
		t.Fatalf("front proxy: %d %q (the X-Remote-* headers must be consumed)", code, body)
	}
	wrongName := clientCert(t, proxyCA, "someone-else")
	wrongCA := clientCert(t, otherCA, "front-proxy-client")
	for name, cert := range map[string]*tls.Certificate{"no cert": nil, "wrong CN": &wrongName, "wrong CA": &wrongCA} {
		if code, body := get(cert, "alice"); code != http.StatusUnauthorized {
			t.Errorf("%s: %d %q, want 401", name, code, body)
		}
	}
}

func TestMissingConfigMapIsAClearError(t *testing.T) {
	_, err := requestheader.NewSource(t.Context(), fake.NewClientset(), 200*time.Millisecond)
	if err == nil {
		t.Fatal("want an error")
	}
	t.Log(err)
}
