package clustercred_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
)

// TestCertificateSourcesRefuseExtras: a certificate cannot carry extras, so
// both certificate sources refuse a user with one (naming the key, never its
// values) instead of issuing a certificate that silently drops it, and the
// CSR source refuses before it asks the cluster for anything. The
// credential ID alone is fine: it names the token the user came with.
func TestCertificateSourcesRefuseExtras(t *testing.T) {
	ca, err := certauthority.New("test", time.Hour, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	csr := &clustercred.CSR{Client: client, Timeout: time.Second}
	withExtra := &user.DefaultInfo{Name: "alice", Extra: map[string][]string{
		user.CredentialIDKey: {"JTI=1"}, "example.com/team": {"value-of-alice-91c3"}}}
	for name, iss := range map[string]clustercred.Source{"CA": &clustercred.CA{CA: ca}, "CSR": csr} {
		_, err := iss.Issue(context.Background(), withExtra)
		var extraErr *clustercred.ExtraError
		if !errors.As(err, &extraErr) || extraErr.Key != "example.com/team" {
			t.Fatalf("%s: got %v, want the extra refused", name, err)
		}
		if want := `authenticator returned extra "example.com/team", which client certificates cannot carry`; err.Error() != want {
			t.Errorf("%s: message %q, want %q", name, err, want)
		}
	}
	if list, _ := client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("the CSR source asked the cluster to sign for a user it refuses: %d requests", len(list.Items))
	}
	onlyID := &user.DefaultInfo{Name: "alice", Extra: map[string][]string{user.CredentialIDKey: {"JTI=1"}}}
	if cred, err := (&clustercred.CA{CA: ca}).Issue(context.Background(), onlyID); err != nil || cred.ClientCertificateData == "" {
		t.Fatalf("the credential ID alone was refused: %v", err)
	}
}
