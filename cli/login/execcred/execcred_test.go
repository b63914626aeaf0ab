package execcred_test

import (
	"bytes"
	"testing"
	"time"

	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
)

func TestParseRequest(t *testing.T) {
	cases := []struct {
		name, env   string
		wantVersion string
		interactive bool
		wantErr     bool
	}{
		{"by hand", "", execcred.V1, true, false},
		{"v1 interactive", `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":true}}`, execcred.V1, true, false},
		{"v1 not interactive", `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false}}`, execcred.V1, false, false},
		{"v1beta1 silent", `{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{}}`, execcred.V1beta1, true, false},
		{"v1beta1 with cluster", `{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false,"cluster":{"server":"https://x","certificate-authority-data":"Y2E="}}}`, execcred.V1beta1, false, false},
		{"v2", `{"apiVersion":"client.authentication.k8s.io/v2","kind":"ExecCredential"}`, "", false, true},
		{"garbage", `{`, "", false, true},
		{"wrong kind", `{"apiVersion":"client.authentication.k8s.io/v1","kind":"Pod"}`, "", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := execcred.ParseRequest(tc.env)
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil || req.APIVersion != tc.wantVersion || req.Interactive != tc.interactive {
				t.Fatalf("%+v %v", req, err)
			}
		})
	}
	req, _ := execcred.ParseRequest(cases[4].env)
	if req.Cluster == nil || req.Cluster.Server != "https://x" || string(req.Cluster.CertificateAuthorityData) != "ca" {
		t.Fatalf("cluster %+v", req.Cluster)
	}
}

// TestOutputDecodesWithClientGoTypes checks our output against client-go's
// own ExecCredential types, in both versions.
func TestOutputDecodesWithClientGoTypes(t *testing.T) {
	exp := time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC)
	s := execcred.Status{ExpirationTimestamp: &exp, ClientCertificateData: "c", ClientKeyData: "k"}
	for _, v := range []string{execcred.V1, execcred.V1beta1} {
		var buf bytes.Buffer
		if err := execcred.Write(&buf, v, s); err != nil {
			t.Fatal(err)
		}
		if v == execcred.V1 {
			var ec clientauthv1.ExecCredential
			if err := yaml.UnmarshalStrict(buf.Bytes(), &ec); err != nil || ec.APIVersion != v || ec.Status.ClientKeyData != "k" || !ec.Status.ExpirationTimestamp.Time.Equal(exp) {
				t.Fatalf("v1: %+v %v\n%s", ec, err, buf.String())
			}
		} else {
			var ec clientauthv1beta1.ExecCredential
			if err := yaml.UnmarshalStrict(buf.Bytes(), &ec); err != nil || ec.Kind != "ExecCredential" || ec.Status.ClientCertificateData != "c" {
				t.Fatalf("v1beta1: %+v %v", ec, err)
			}
		}
	}
}

// TestToldToRenewAhead: client-go is told the credential ends RenewAhead
// before it does, and asks again then; the cache has no credential with so
// little left, so it is a new one it gets, never the same one again and
// again. One with little life left is told as it is, and no expiry stays
// none.
func TestToldToRenewAhead(t *testing.T) {
	if execcred.RenewAhead <= 0 || execcred.RenewAhead >= credcache.DefaultSkew {
		t.Fatalf("RenewAhead %v must be above 0 and below the cache's skew %v", execcred.RenewAhead, credcache.DefaultSkew)
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for left, want := range map[time.Duration]time.Duration{
		5 * time.Minute:  5*time.Minute - execcred.RenewAhead,
		31 * time.Second: 31*time.Second - execcred.RenewAhead,
		29 * time.Second: 29 * time.Second,
		5 * time.Second:  5 * time.Second,
		-time.Second:     -time.Second,
	} {
		if got := execcred.KubectlExpiry(now.Add(left), now); !got.Equal(now.Add(want)) {
			t.Errorf("%v left: told %v, want %v", left, got.Sub(now), want)
		}
	}
	if got := execcred.KubectlExpiry(time.Time{}, now); !got.IsZero() {
		t.Errorf("no expiry: told %v", got)
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":true}}`)
	f.Add(`{"apiVersion":"client.authentication.k8s.io/v1beta1","spec":{"cluster":{"certificate-authority-data":"!!"}}}`)
	f.Fuzz(func(t *testing.T, env string) {
		req, err := execcred.ParseRequest(env)
		if err == nil && req.APIVersion != execcred.V1 && req.APIVersion != execcred.V1beta1 {
			t.Fatalf("accepted version %q", req.APIVersion)
		}
	})
}

// TestStatusOf: kubectl gets the credential's secrets and the expiry
// KubectlExpiry makes of its own; one that never expires keeps a zero one.
func TestStatusOf(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := credcache.Credential{Token: "t", ClientCertificateData: "cert", ClientKeyData: "key", ExpirationTimestamp: now.Add(time.Hour)}
	s := execcred.StatusOf(c, now)
	if s.Token != "t" || s.ClientCertificateData != "cert" || s.ClientKeyData != "key" || s.ExpirationTimestamp == nil ||
		!s.ExpirationTimestamp.Equal(execcred.KubectlExpiry(c.ExpirationTimestamp, now)) || !s.ExpirationTimestamp.Before(c.ExpirationTimestamp) {
		t.Fatalf("%+v", s)
	}
	if s := execcred.StatusOf(credcache.Credential{Token: "t"}, now); s.ExpirationTimestamp == nil || !s.ExpirationTimestamp.IsZero() {
		t.Fatalf("no expiry: %+v", s)
	}
}
