package impersonator_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
)

func TestSARAuthorizer(t *testing.T) {
	client := fake.NewClientset()
	var asked []string
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		ra := sar.Spec.ResourceAttributes
		asked = append(asked, ra.Resource+"/"+ra.Subresource+"/"+ra.Name)
		// alice may impersonate bob and group ops, nothing else.
		allowed := sar.Spec.User == "alice" && ra.Verb == "impersonate" &&
			((ra.Resource == "users" && ra.Name == "bob") || (ra.Resource == "groups" && ra.Name == "ops"))
		sar.Status.Allowed = allowed
		return true, sar, nil
	})
	authz := &impersonator.SARAuthorizer{Reviews: client.AuthorizationV1().SubjectAccessReviews()}
	alice := &user.DefaultInfo{Name: "alice"}
	ctx := context.Background()

	if ok, _, err := authz.CanImpersonate(ctx, alice, &impersonator.Request{User: "bob", Groups: []string{"ops"}}); !ok || err != nil {
		t.Fatalf("bob+ops: %v %v", ok, err)
	}
	ok, reason, _ := authz.CanImpersonate(ctx, alice, &impersonator.Request{User: "bob", Groups: []string{"ops", "system:masters"}})
	if ok || !strings.Contains(reason, "system:masters") {
		t.Fatalf("system:masters must be refused: %v %q", ok, reason)
	}
	asked = nil
	ok, _, _ = authz.CanImpersonate(ctx, alice, &impersonator.Request{User: "system:serviceaccount:kube-system:default", Extra: map[string][]string{"scopes": {"x"}}})
	if ok || asked[0] != "serviceaccounts//default" {
		t.Fatalf("service accounts are checked as serviceaccounts: %v %v", ok, asked)
	}
}

func TestAuthenticatorCertsAndTokens(t *testing.T) {
	signer, _ := certauthority.New("signer", time.Hour, nil)
	stranger, _ := certauthority.New("stranger", time.Hour, nil)
	cas := &impersonator.ClientCAs{}
	cas.Set(signer.CertPEM())
	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == "sa-token" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: "system:serviceaccount:default:builder", UID: "u-1", Groups: []string{"system:serviceaccounts"}}}
		}
		return true, tr, nil
	})
	authn := union.New(impersonator.NewCertAuthenticator(cas), impersonator.NewTokenAuthenticator(client.AuthenticationV1()))
	who := make(chan string, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, _ := authn.AuthenticateRequest(r)
		if !ok {
			who <- ""
			return
		}
		who <- resp.User.GetName() + "|" + strings.Join(resp.User.GetGroups(), ",")
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	call := func(cert *certauthority.CA, token string) string {
		cfg := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
		cfg.RootCAs.AddCert(srv.Certificate())
		if cert != nil {
			issued, _ := cert.IssueClientCert("carol", "", []string{"qa"}, time.Minute)
			pair, _ := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
			cfg.Certificates = []tls.Certificate{pair}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return <-who
	}
	if got := call(signer, ""); got != "carol|qa" {
		t.Errorf("signer's certificate: %q", got)
	}
	if got := call(stranger, ""); got != "" {
		t.Errorf("a stranger CA's certificate was accepted: %q", got)
	}
	if got := call(nil, "sa-token"); got != "system:serviceaccount:default:builder|system:serviceaccounts" {
		t.Errorf("ServiceAccount token: %q", got)
	}
	if got := call(nil, "forged"); got != "" {
		t.Errorf("a forged token was accepted: %q", got)
	}
}
